"""Checkpoint keys that explain themselves: a missing, different, empty or misplaced key says exactly that."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentnb as anb


@pytest.fixture(autouse=True)
def no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTNB_CHECKPOINT_KEY", raising=False)


def stored_run(db: Path, **key: object) -> str:
    store = anb.SqliteStore(db, **key)  # type: ignore[arg-type]
    loop = anb.Loop(model=anb.ScriptedModel.story("refund"), tools=anb.stories.tools("refund"), store=store)
    run_id = loop.start("Refund order 42").run().run_id
    store.close()
    return run_id


def test_a_missing_key_file_is_reported_as_missing_not_tampering(tmp_path: Path) -> None:
    key_file = tmp_path / "k" / "checkpoint.key"
    stored_run(tmp_path / "c.db", key_file=key_file)
    key_file.unlink()
    with pytest.raises(anb.CheckpointError, match="key file .* is missing.*Restore that key file"):
        anb.SqliteStore(tmp_path / "c.db", key_file=key_file)
    assert not key_file.exists()  # no new key was made to replace it


def test_a_different_key_says_so(tmp_path: Path) -> None:
    stored_run(tmp_path / "c.db", key="the-first-key-123")
    with pytest.raises(anb.CheckpointError, match="sealed with a different key"):
        anb.SqliteStore(tmp_path / "c.db", key="another-key-4567")


def test_a_trailing_newline_in_a_key_file_is_tolerated(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("a-key-written-by-echo\n")
    key_file.chmod(0o600)
    run_id = stored_run(tmp_path / "c.db", key_file=key_file)
    assert anb.SqliteStore(tmp_path / "c.db", key="a-key-written-by-echo").load(run_id)


@pytest.mark.parametrize("key", ["", "short", "\n"])
def test_an_empty_or_short_key_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(anb.CheckpointError, match="at least 8 bytes"):
        anb.SqliteStore(tmp_path / "c.db", key=key)


def test_a_directory_as_key_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    with pytest.raises(anb.CheckpointError, match="is a directory"):
        anb.SqliteStore(tmp_path / "c.db", key_file=tmp_path / "keys")


def test_a_key_file_in_a_missing_directory_is_made_with_its_directory(tmp_path: Path) -> None:
    key_file = tmp_path / "not" / "yet" / "checkpoint.key"
    stored_run(tmp_path / "c.db", key_file=key_file)
    assert key_file.exists() and key_file.stat().st_mode & 0o777 == 0o600


def test_a_key_file_whose_directory_cannot_be_made_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(anb.CheckpointError, match=r"cannot create the directory .*a-file.* for the checkpoint key "
                                                  r"file .*checkpoint.key.*AGENTNB_CHECKPOINT_KEY"):
        anb.SqliteStore(tmp_path / "c.db", key_file=tmp_path / "a-file" / "keys" / "checkpoint.key")
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # the working directory itself is deleted: a relative key file's directory cannot be made
    with pytest.raises(anb.CheckpointError, match=r"cannot create the directory keys for the checkpoint key file "
                                                  r"keys/checkpoint.key: No such file or directory"):
        anb.SqliteStore(tmp_path / "d.db", key_file="keys/checkpoint.key")


def test_a_dangling_link_as_key_file_is_named(tmp_path: Path) -> None:
    link = tmp_path / "checkpoint.key"
    link.symlink_to(tmp_path / "nowhere" / "real.key")
    with pytest.raises(anb.CheckpointError, match=r"checkpoint key file .*checkpoint.key.* is a link to .*nowhere"):
        anb.SqliteStore(tmp_path / "c.db", key_file=link)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_key_file_in_a_directory_that_cannot_be_written_names_the_path(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(anb.CheckpointError, match=r"cannot create the checkpoint key file .*locked.*Permission"):
        anb.SqliteStore(tmp_path / "c.db", key_file=locked / "checkpoint.key")


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("a-perfectly-good-key")
    key_file.chmod(0o644)
    with pytest.raises(anb.CheckpointError, match="readable by others"):
        anb.SqliteStore(tmp_path / "c.db", key_file=key_file)


def test_readonly_opens_for_analysis_and_refuses_writes(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    run_id = stored_run(db, key="read-only-key-01")
    ro = anb.SqliteStore(db, key="read-only-key-01", readonly=True)
    assert len(ro.load(run_id)) > 5 and ro.runs()
    with pytest.raises(anb.CheckpointError, match="read-only"):
        ro.acquire_lease(run_id, "me")


@pytest.fixture
def readonly_mount(tmp_path: Path) -> Iterator[Path]:
    src, mount = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    mount.mkdir()
    made = subprocess.run(["mount", "--bind", "-o", "ro", str(src), str(mount)], capture_output=True)
    if made.returncode != 0 or os.access(mount, os.W_OK) and os.geteuid() != 0:
        pytest.skip(f"cannot make a read-only bind mount here: {made.stderr.decode().strip()}")
    try:
        yield src
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_store_on_a_read_only_mount_can_be_read(readonly_mount: Path) -> None:
    src = readonly_mount
    run_id = stored_run(src / "c.db", key="read-only-key-01")
    mount = src.parent / "ro"
    subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], capture_output=True)
    with pytest.raises(anb.CheckpointError):
        anb.SqliteStore(mount / "c.db", key="read-only-key-01")  # writable open fails on a read-only mount
    ro = anb.SqliteStore(mount / "c.db", key="read-only-key-01", readonly=True)
    assert ro.load(run_id)[0].type == "RunStarted"
    assert shutil.disk_usage(mount)  # still mounted


def test_a_seal_is_the_plain_hmac_of_its_parts_so_older_checkpoints_still_verify() -> None:
    import hashlib
    import hmac

    from agentnb.store._seals import Seals

    key = b"a checkpoint key"
    seals = Seals(key)
    for parts in [("", "run_1", "0", '{"seq":0}'), ("ab" * 32, "run_1", "1", "é\x1f")]:
        assert seals.mac(*parts) == hmac.new(key, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()
    assert seals.mac("x") == seals.mac("x") != Seals(b"another key!").mac("x")


def test_a_sealed_row_that_is_not_an_event_is_named(tmp_path: Path) -> None:
    from agentnb.events import event_to_json
    from agentnb.store._seals import Seals

    run = anb.Loop(model=anb.ScriptedModel.story("weather"), tools=anb.stories.tools("weather")).start("go").run()
    seals = Seals(b"a checkpoint key")
    rows, prev = [], ""
    for ev in run.events:
        data = event_to_json(ev) if ev.seq != 2 else '{"type":"TextMerged","seq":2}'
        prev = seals.event(prev, run.run_id, ev.seq, data)
        rows.append((ev.seq, data, prev))
    ledger = [(0, "init", "", "", "", None, None, None, "", seals.ledger(run.run_id, 0, "init", "", "", "", None,
                                                                           None, None, ""))]
    head = (len(rows) - 1, prev, 0, ledger[0][-1])
    with pytest.raises(anb.CheckpointError, match=r"event 2 cannot be read"):
        seals.verify(run.run_id, head, rows, ledger)
    rows[2] = (2, event_to_json(run.events[2]), rows[2][2])
    with pytest.raises(anb.CheckpointError, match=r"event 2 was changed after it was written"):
        seals.verify(run.run_id, head, rows, ledger)
