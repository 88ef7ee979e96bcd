"""Streamlit's command line with the dashboard's own navigation in charge from the very first request: app.py's
st.navigation defines the pages, so a deep link (/Review?review=3) shows the same sidebar as the front page."""
import sys

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

if __name__ == "__main__":
    # Otherwise Streamlit builds its older pages/-folder navigation until the first run of app.py switches it off.
    PagesManager.uses_pages_directory = False
    sys.exit(cli.main())
