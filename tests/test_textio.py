"""Reading the user's text: lines end at ``\\n`` (or ``\\r\\n``) only, and any other line break
(``str.splitlines``'s) is refused with its line, column and name, never split at nor merged
silently: files and standard input (the command line), and texts given to the Python API."""

import io
import re

import pytest

from cli_checks import fails, succeeds
from seqlab import load
from seqlab.cli import main
from seqlab.data.vocab import UnknownTokenWarning
from seqlab.errors import SeqlabError
from seqlab.storage.text import ODD_LINE_BREAKS, decode_lines, own_data

#: every line break of str.splitlines besides \n and \r\n (the lone \r: old Mac files)
ODD = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def test_the_odd_line_breaks_are_those_of_splitlines():
    breaks = {c for c in map(chr, range(0x3000)) if len(f"a{c}b".splitlines()) == 2}
    assert breaks - {"\n"} == set(ODD) == set(ODD_LINE_BREAKS)


@pytest.mark.parametrize("char", ODD, ids=[f"U+{ord(c):04X}" for c in ODD])
def test_a_file_holding_an_odd_line_break_is_refused_naming_line_column_and_character(char):
    raw = f"May 9, 1998\r\n9 May{char}1998\n".encode()
    with pytest.raises(SeqlabError) as refused:
        decode_lines(raw, "in.txt")
    message = str(refused.value)
    assert message.startswith(f"in.txt:2: U+{ord(char):04X} ({ODD_LINE_BREAKS[char]}) at column 6")
    assert "\n" not in message and "nothing was read" in message


def test_newlines_and_crlf_still_end_lines_and_a_last_cr_ends_the_last():
    assert decode_lines(b"\xef\xbb\xbfa\r\nb\nc\r", "x") == ["a", "b", "c"]
    assert decode_lines("a\tb \u00a0c\n".encode(), "x") == ["a\tb \u00a0c"]  # not breaks


def test_the_command_line_refuses_them_in_files_and_standard_input(
    tiny_runs, tmp_path, monkeypatch, capsys
):
    run = str(tiny_runs["mt"])
    tiny_runs["cls"]
    capsys.readouterr()  # the runs' training, if it happened now
    mac = tmp_path / "mac.txt"
    mac.write_bytes(b"May 9, 1998\r9 May 1998\r")  # an old Mac file: one line to other readers
    out = tmp_path / "out.txt"
    assert main(["translate", "--run", run, "--input", str(mac)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"seqlab: error: {mac}:1: U+000D (CARRIAGE RETURN) at column 12")
    assert "tr '\\r' '\\n'" in err and len(err.splitlines()) == 1
    ref = tmp_path / "ref.txt"
    ref.write_text("1998-05-09\n")
    src = tmp_path / "src.txt"
    src.write_text("May 9,\u20281998\n")
    args = ["evaluate", "--run", run, "--src", str(src), "--ref", str(ref)]
    assert main([*args, "--output", str(out)]) == 2
    assert f"{src}:1: U+2028 (LINE SEPARATOR) at column 7" in capsys.readouterr().err
    assert not out.exists()  # nothing was written
    monkeypatch.setattr(
        "sys.stdin", io.TextIOWrapper(io.BytesIO("great fun\x85 loved it\n".encode()))
    )
    assert main(["classify", "--run", str(tiny_runs["cls"])]) == 2
    captured = capsys.readouterr()
    assert "<stdin>:1: U+0085 (NEXT LINE) at column 10" in captured.err and captured.out == ""


def test_the_python_api_refuses_them_in_every_text_it_reads(tiny_runs):
    mt, cls, lm = (load(tiny_runs[name]) for name in ("mt", "cls", "lm"))
    calls = {
        "sentence 1 holds U+2028": lambda: mt.translate(["May 9, 1998", "9 May\u20281998"]),
        "sentence 0 holds U+000C": lambda: mt.hypotheses("9 May\x0c1998"),
        "reference 0 holds U+2029": lambda: mt.score(["9 May 1998"], ["1998\u202905-09"]),
        "sentence 0 holds U+000D": lambda: cls.classify("great fun\rloved it"),
        "the prefix holds U+001E": lambda: lm.generate("the time\x1etraveller", tokens=2),
        "the text holds U+000B": lambda: lm.perplexity("the time\x0btraveller"),
    }
    for expected, call in calls.items():
        pattern = re.escape(expected) + r" \(.*\) at character \d+, a line break"
        with pytest.raises(SeqlabError, match=pattern):
            call()
    with own_data(), pytest.warns(UnknownTokenWarning):  # a run's own data: read as it trained
        assert len(mt.translate(["9 May\u20281998"])) == len(cls.classify(["great\x0cfun"])) == 1
    with pytest.warns(UnknownTokenWarning, match=r"sentence 0: 1 token .*: '\\r'$"):
        mt.translate("May 9, 1998\r")  # a last \r breaks nothing: a character, unknown here
    with pytest.warns(UnknownTokenWarning, match=r"the text: 3 tokens .*: '\\n', '\\r'$"):
        scores = lm.perplexity("the time\ntraveller\r\n")  # \n, \r\n: lines of a text
    assert scores["tokens"] == 19  # every character read (the first predicts the rest)


def test_bad_input_files(runs, tmp_path, capsys):
    base = ["translate", "--run", runs / "mt", "--input"]
    fails(capsys, base + [tmp_path / "nope.txt"], "input file not found", tmp_path / "nope.txt")
    fails(capsys, base + [tmp_path], "is a directory")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    fails(capsys, base + [bad], f"{bad}:2", "not valid UTF-8")


LATIN1 = "good film\ncaf\xe9 film\n".encode("latin-1")


def stdin_of(monkeypatch, data: bytes):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize("command,run", [("translate", "mt"), ("classify", "cls")])
def test_stdin_is_read_like_a_file(runs, tmp_path, monkeypatch, capsys, command, run):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(LATIN1)
    base = [command, "--run", runs / run]
    fails(capsys, [*base, "--input", bad], f"{bad}:2", "not valid UTF-8")
    stdin_of(monkeypatch, LATIN1)
    fails(capsys, base, "<stdin>:2", "not valid UTF-8")
    # surrogate escapes from a text stream are the same undecodable bytes
    monkeypatch.setattr("sys.stdin", io.StringIO(LATIN1.decode("utf-8", "surrogateescape")))
    fails(capsys, base, "<stdin>:2", "not valid UTF-8")
    good = "\ufeffa great film\r\nMay 9, 1998\n".encode()
    ok = tmp_path / "ok.txt"
    ok.write_bytes(good)
    from_file = succeeds(capsys, [*base, "--input", ok]).out
    stdin_of(monkeypatch, good)
    assert succeeds(capsys, base).out == from_file and len(from_file.splitlines()) == 2
