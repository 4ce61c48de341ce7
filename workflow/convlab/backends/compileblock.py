"""A kernel that does not compile, shown as one block: its file and line first, then each message
with the line of the file it points at. A cpu twin's is Python's SyntaxError; a .cu's is NVRTC's
log, which the compiler process hands over as one line and which names the program NVRTC was given
(CuPy's ``kern.cu``), not the kernel's file."""

from __future__ import annotations

import re

# NVRTC's place of a message: "<folder>/kern.cu(42): error: ..." (the folder is CuPy's temporary one)
NVRTC_PLACE = re.compile(r"(?:[^\s\"]*/)?kern\.cu\((\d+)\): ")
NVRTC_TALLY = re.compile(r"\s*(\d+ errors? detected) in the compilation of \"[^\"]*\"\.?\s*$")
HEAD = "compile error: "


def source_line(text: str, number: int) -> str | None:
    """Line ``number`` (from 1) of ``text``, as a block quotes it, or None past its end."""
    lines = text.splitlines()
    if 1 <= number <= len(lines):
        return f"  {number:>5} | {lines[number - 1].rstrip()}"
    return None


def without_quote(message: str, source: str, number: int) -> str:
    """NVRTC's message without the line it quotes and its caret ("... expected an expression
    float s = ; ^"): the block quotes the line from the file itself."""
    text = " ".join(message.split())
    if text.endswith("^"):
        text = text[:-1].rstrip()
        lines = source.splitlines()
        quoted = " ".join(lines[number - 1].split()) if 1 <= number <= len(lines) else ""
        if quoted and text.endswith(quoted):
            text = text[:-len(quoted)].rstrip()
    return text


def python_block(source: bytes, shown: str) -> list[str] | None:
    """A cpu twin's ``source`` (the file ``shown``) compiled: None, or its SyntaxError as a block,
    its place, the line and a caret. Compiled under a name that is no file, as Python reads the
    line (and sets the caret) from a file of the given name, which a save can have changed since."""
    try:
        compile(source, f"<{shown}>", "exec")
    except SyntaxError as error:
        lines = [f"{HEAD}{shown}:{error.lineno}: {type(error).__name__}: {error.msg}"]
        quoted = source_line(source.decode(errors="replace"), error.lineno or 0)
        if quoted:
            lines.append(quoted)
            if error.offset and error.offset > 0:
                lines.append(f"  {'':>5} | {' ' * (error.offset - 1)}^")
        return lines
    return None


def nvrtc_block(reason: str, shown: str, source: str) -> list[str]:
    """A .cu's compile failure (a cell's reason: "compile: <NVRTC's log>") as a block naming
    ``shown`` (the kernel's .cu) and quoting ``source`` (its text) at each message's line."""
    log = reason.removeprefix("compile:").strip()
    tally = NVRTC_TALLY.search(log)
    if tally:
        log = log[:tally.start()]
    parts = NVRTC_PLACE.split(log)
    messages = [(int(parts[i]), without_quote(parts[i + 1], source, int(parts[i]))) for i in range(1, len(parts) - 1, 2)]
    if not messages:
        return [f"{HEAD}{shown}: {log}"]
    first_line, first_message = messages[0]
    lines = [f"{HEAD}{shown}:{first_line}: {first_message}"]
    for number, message in messages:
        if (number, message) != (first_line, first_message):
            lines.append(f"  {shown}:{number}: {message}")
        quoted = source_line(source, number)
        if quoted:
            lines.append(quoted)
    if tally:
        lines.append(f"  ({tally.group(1)})")
    return lines
