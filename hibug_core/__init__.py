"""hibug_core: find, explain and repair the error slices of computer-vision models (HiBug, HiBug2)."""
import os
import warnings

# OpenMP's idle workers (torch's thread pool) sleep at once instead of spinning for the next parallel region, unless
# the environment says otherwise. hibug runs jobs, the dashboard and other work side by side on a few cores, and
# spinning workers take the cores the others wait for: two pose demo builds at once took 264 s spinning, 45 s
# passive (34 s to 43 s for one alone). libgomp reads this once, when torch loads, so it is set before any import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from hibug_core.redaction import redact_logs as _redact_logs
from hibug_core.torch_compat import install_import_hook as _install_import_hook

_install_import_hook()
_redact_logs()  # no log line of this process carries a key (the HTTP client logs request URLs)
# Pillow warns about images above 89 Mpx and refuses them above 179 Mpx; hibug reads what Pillow reads, silently,
# and names the refused ones (ingest.images).
warnings.filterwarnings("ignore", message=r"Image size \(\d+ pixels\) exceeds limit")

__version__ = "0.1.0"

from hibug_core.errors import HibugError, ManifestError, ProjectError  # noqa: E402

__all__ = ["HibugError", "ManifestError", "Project", "ProjectError", "__version__"]


def __getattr__(name: str):
    # The store (SQLAlchemy, pandas) loads when Project is first asked for, not with every hibug_core module: a
    # worker process that measures masks or people starts about a second sooner.
    if name == "Project":
        from hibug_core.store.project import Project

        return Project
    raise AttributeError(f"module 'hibug_core' has no attribute {name!r}")
