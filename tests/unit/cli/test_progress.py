"""``apply --wait``'s output (issue 33 item 6): on a terminal one block redrawn in place, not a
line per waiting item and pass; without one, a line per change of state only."""

from __future__ import annotations

import io

from reconciler.cli.progress import MAX_LINES, WaitProgress

VM = "fw-node-1: booting for {} s (VM Starting)"
HELD = "Binding/web held on node-1: steered once fw-node-1 is healthy; shop/web-1 is NOT protected"


def test_without_a_terminal_only_changes_of_state_are_logged() -> None:
    out = io.StringIO()
    progress = WaitProgress(out, tty=False)
    progress.update(0.1, [VM.format(1), HELD])
    progress.update(1.1, [VM.format(2), HELD])  # seconds tick: no change of state
    progress.update(2.1, [VM.format(3), HELD])
    progress.update(3.1, ["fw-node-1: probe failing", HELD])  # the VM's state changes
    progress.update(4.2, [])  # everything ready
    assert out.getvalue().splitlines() == [
        f"waiting 0.1s: {VM.format(1)}",
        f"waiting 0.1s: {HELD}",
        "waiting 3.1s: fw-node-1: probe failing",
        "waiting 4.2s: done: fw-node-1",
        "waiting 4.2s: done: Binding/web held on node-1",
    ]


def test_on_a_terminal_one_block_is_redrawn_in_place_and_removed_at_the_end() -> None:
    out = io.StringIO()
    progress = WaitProgress(out, tty=True, width=200)
    many = [f"vnf-node-{i}: probe failing" for i in range(MAX_LINES + 3)]
    progress.update(1.0, many)
    first = out.getvalue()
    assert first.splitlines()[0] == f"waiting 1 s: {MAX_LINES + 3} not ready"
    assert first.splitlines()[-1] == "  … 3 more"
    drawn = MAX_LINES + 2
    progress.update(2.0, many[:2])
    second = out.getvalue()[len(first) :]
    assert second.startswith(f"\033[{drawn}F\033[J")  # back to the block's top, cleared
    assert second.count("\n") == 3  # head + 2 lines: one block, not a line per pass and item
    progress.finish()
    assert out.getvalue().endswith("\033[3F\033[J")


def test_on_a_narrow_terminal_lines_are_cut_so_the_block_keeps_one_row_each() -> None:
    out = io.StringIO()
    WaitProgress(out, tty=True, width=40).update(1.0, [HELD])
    assert all(len(line) <= 40 for line in out.getvalue().splitlines())
