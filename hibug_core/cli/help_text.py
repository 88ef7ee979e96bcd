"""Help text as argparse takes it: argparse %-formats help, so a description's '10%' would break `--help`."""


def literal_help(text: str) -> str:
    return text.replace("%", "%%")
