"""The console printer never blocks the daemon, even when the terminal stops reading."""

from __future__ import annotations

import io
import threading

from polpo.console import ConsolePrinter


class _GatedStream(io.StringIO):
    """A stream whose writes block until the gate opens: a paused terminal or an unread pipe."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def write(self, s: str) -> int:
        self.gate.wait(10)
        return super().write(s)


def test_print_returns_while_the_terminal_blocks_and_reports_dropped_lines() -> None:
    stream = _GatedStream()
    printer = ConsolePrinter(stream, capacity=5)
    for i in range(50):  # would block forever if print() wrote synchronously
        printer.print(f"line {i}")
    assert printer.dropped >= 50 - 2 * 5  # capacity queued, at most one burst (≤ capacity) in the writer's hands
    stream.gate.set()
    printer.close()
    out = stream.getvalue()
    assert "line 0" in out
    assert "lines dropped while the terminal was not reading" in out
    assert out.count("line ") <= 2 * 5


def test_lines_arrive_in_order_when_the_terminal_keeps_up() -> None:
    stream = io.StringIO()
    printer = ConsolePrinter(stream)
    for i in range(100):
        printer.print(f"l{i}")
    printer.close()
    assert stream.getvalue().splitlines() == [f"l{i}" for i in range(100)]
    assert printer.dropped == 0


class _CountingStream(_GatedStream):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self.writing = threading.Event()

    def write(self, s: str) -> int:
        self.writing.set()
        self.writes.append(s)
        return super().write(s)


def test_lines_printed_while_the_writer_is_busy_go_out_in_one_write() -> None:
    stream = _CountingStream()
    printer = ConsolePrinter(stream)
    printer.print("first")
    assert stream.writing.wait(10)  # the writer holds "first", blocked on the terminal
    for i in range(100):
        printer.print(f"l{i}")
    stream.gate.set()
    printer.close()
    assert stream.writes == ["first\n", "".join(f"l{i}\n" for i in range(100))]  # one wake-up, one write
