"""The dashboard's pages: file, title, icon and URL path, in menu order, and the page of each checklist step."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Page(NamedTuple):
    path: str
    title: str
    icon: str  # Material icons: drawn by Streamlit's own font, so they show in any browser

    @property
    def url_path(self) -> str:
        """What Streamlit serves the page under: the file name without its number ("Error_slices")."""
        return Path(self.path).stem.split("_", 1)[1]


PAGES = [Page("pages/1_Attributes.py", "Attributes", ":material/label:"),
         Page("pages/2_Tagging.py", "Tagging", ":material/sell:"),
         Page("pages/3_Embedding_map.py", "Embedding map", ":material/scatter_plot:"),
         Page("pages/4_Error_slices.py", "Error slices", ":material/bug_report:"),
         Page("pages/7_Compare.py", "Compare", ":material/compare_arrows:"),
         Page("pages/5_Repair.py", "Repair", ":material/build:"),
         Page("pages/6_Review.py", "Review", ":material/forum:")]
URL_PATHS = ("", *(page.url_path for page in PAGES))  # "" is the Overview
STEP_PAGES = {"Attributes": "pages/1_Attributes.py", "Tags": "pages/2_Tagging.py",
              "Error slices": "pages/4_Error_slices.py", "Embedding map": "pages/3_Embedding_map.py",
              "Repair": "pages/5_Repair.py"}  # hibug_core.checklist's steps
