"""Progress bars: drawn on a terminal only, and never inside ``no_progress`` (the server's workers),
whose setting holds for the thread that entered it and no other."""

import io
import sys
import threading

from seqlab.runtime.progress import no_progress, progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_bars_on_a_terminal_only(monkeypatch):
    terminal, log = Terminal(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert list(progress(range(3), "counting")) == [0, 1, 2]
    assert "counting" in terminal.getvalue()
    monkeypatch.setattr(sys, "stderr", log)
    assert list(progress(range(3), "counting")) == [0, 1, 2]
    assert log.getvalue() == ""


def test_no_progress_hides_the_bars_of_its_own_thread_only(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    elsewhere = threading.Thread(target=lambda: list(progress(range(3), "other thread")))
    with no_progress():
        assert list(progress(range(3), "hidden")) == [0, 1, 2]
        elsewhere.start()
        elsewhere.join()
        with no_progress():  # nested blocks: still hidden after the inner one ends
            pass
        list(progress(range(3), "still hidden"))
    list(progress(range(3), "shown again"))
    drawn = terminal.getvalue()
    assert "hidden" not in drawn
    assert "other thread" in drawn and "shown again" in drawn
