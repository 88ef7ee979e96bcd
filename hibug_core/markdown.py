"""People's text (comments, attribute and tag names, project and user names) shown as text in Markdown (the
dashboard's and the reports'): every character that Markdown would read as markup (links, emphasis, HTML, LaTeX,
colour and icon directives, headings and lists) is escaped, and any secret in it hidden."""
from __future__ import annotations

import re

from hibug_core.redaction import redact

_ANYWHERE = re.compile(r"([\\`*_{}\[\]()<>~$|:&!])")  # & keeps entities literal
_LINE_START = re.compile(r"^(\s*)([#+\-=]|\d+(?=[.)]))", re.MULTILINE)  # headings, list items, setext underlines
_CODE = re.compile(r"(`[^`\n]+`)")  # a code span: shown as code, its content literal already


def plain(value, *, keep_code: bool = False) -> str:
    """`value` as literal text inside st.markdown, st.caption, st.subheader and the like. keep_code: its code spans
    (hibug's own advice, such as `open_clip:<arch>:<checkpoint>`) stay code spans instead of showing their backticks."""
    if keep_code:
        return "".join(part if i % 2 else plain(part) for i, part in enumerate(_CODE.split(redact(str(value)))))
    text = _ANYWHERE.sub(r"\\\1", redact(str(value)))
    text = _LINE_START.sub(lambda m: m.group(1) + ("\\" + m.group(2) if not m.group(2)[0].isdigit()
                                                   else m.group(2) + "\\"), text)
    text = re.sub(r"(?i)\b(www)\.", r"\1\\.", text)  # GFM would turn a bare www.… into a link
    return text.replace("\n", "  \n")


def cell(value) -> str:
    """`value` as literal text on one line of Markdown (a table cell, a heading): escaped, its line breaks spaces."""
    return plain(" ".join(str(value).split()))
