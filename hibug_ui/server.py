"""Streamlit's command line with the dashboard's own navigation in charge from the very first request: app.py's
st.navigation defines the pages, so a deep link (/Review?review=3) shows the same sidebar as the front page."""
import logging
import sys

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli


def log_refusals() -> None:
    """hibug's warnings (a refused link, path or sign-in) in the server's log, beside Streamlit's own."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("hibug_core", "hibug"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.WARNING)


if __name__ == "__main__":
    log_refusals()
    # Otherwise Streamlit builds its older pages/-folder navigation until the first run of app.py switches it off.
    PagesManager.uses_pages_directory = False
    sys.exit(cli.main())
