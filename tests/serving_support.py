"""A shared server's surroundings for tests: small projects, the files a visitor should never reach, a local OpenID
Connect provider and the secrets and roles that point the dashboard at it."""
from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

from PIL import Image

ROLES = {"admin": ["ada@example.com"], "editor": ["eddie@example.com"], "viewer": ["vic@example.com"]}


def make_project(folder: Path, images: Path) -> Path:
    """A three-image project in `folder`, its images and manifest in `images`."""
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    images.mkdir(parents=True, exist_ok=True)
    for i, colour in enumerate([(200, 0, 0), (0, 200, 0), (0, 0, 200)]):
        Image.new("RGB", (32, 32), colour).save(images / f"{i}.png")
    (images / "manifest.csv").write_text("image,label,prediction,split\n0.png,red,red,val\n1.png,green,red,val\n"
                                         "2.png,blue,blue,val\n")
    Project.create_from_manifest(folder, load_manifest(images / "manifest.csv")).close()
    return folder


@contextlib.contextmanager
def oidc_provider():
    """A local OpenID Connect provider (oidc-provider-mock); yields its base URL. Whoever signs in types their
    identity, which becomes their e-mail claim."""
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread() as server:
        yield f"http://localhost:{server.server_port}"


def write_sign_in(folder: Path, provider: str, dashboard: str) -> tuple[Path, Path]:
    """The secrets file ([auth] for Streamlit's st.login against `provider`) and the roles file of a dashboard
    served at `dashboard`."""
    secrets_file, roles_file = folder / "secrets.toml", folder / "roles.toml"
    secrets_file.write_text(
        "[auth]\n"
        f'redirect_uri = "{dashboard}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(16)}"\n'
        'client_id = "hibug-test"\n'
        'client_secret = "not-a-secret"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n')
    roles_file.write_text("".join(f"{role} = {entries!r}\n".replace("'", '"') for role, entries in ROLES.items()))
    return secrets_file, roles_file
