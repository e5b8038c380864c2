"""Durable stores: writes survive a reopen, checkpoint empties the journal,
stats report it, a damaged journal is refused with MNEMO_E_CORRUPT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo import Status


def test_reopen_after_writes(cpu_rt, rng, tmp_path: Path) -> None:
    path = tmp_path / "memory.store"
    vectors = ref.randn(rng, (50, 24))
    with mnemo.open_durable(cpu_rt, path, dim=24, metric="dot", sync="os") as store:
        store.add(np.arange(50), vectors)
        assert store.remove([3, 4, 999]) == 2
        store.set_bias([7], [0.25])
        stats = store.stats()
        assert stats.durable and stats.vectors == 48 and stats.journal_records == 3
        assert stats.journal_bytes > 0 and stats.sequence == 3
    with mnemo.Store.open_durable(cpu_rt, path) as back:
        assert back.count() == 48 and back.dim == 24 and back.metric == mnemo.Metric.DOT
        assert np.array_equal(back.get(10), vectors[10])
        with pytest.raises(mnemo.MnemoError) as exc:
            back.get(3)
        assert exc.value.status == Status.E_NOT_FOUND
        q = ref.randn(rng, (24,))
        ids, scores = back.search(q, 5, apply_bias=True)
        want = vectors.astype(np.float64) @ q.astype(np.float64)
        want[[3, 4]] = -np.inf
        want[7] += 0.25
        assert ids.tolist() == np.argsort(-want, kind="stable")[:5].tolist()
        back.checkpoint()
        after = back.stats()
        assert after.journal_records == 0 and after.vectors == 48
        back.add([500], vectors[:1])
    with mnemo.Store.open_durable(cpu_rt, path) as again:
        assert again.count() == 49 and np.array_equal(again.get(500), vectors[0])


def test_plain_store_has_no_journal(cpu_rt) -> None:
    store = mnemo.Store(cpu_rt, 4)
    assert not store.stats().durable
    with pytest.raises(mnemo.MnemoError) as exc:
        store.checkpoint()
    assert exc.value.status == Status.E_UNSUPPORTED


def test_missing_store_and_bad_options(cpu_rt, tmp_path: Path) -> None:
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.open_durable(cpu_rt, tmp_path / "absent.store")
    assert exc.value.status == Status.E_IO
    with pytest.raises(ValueError, match="sync"):
        mnemo.open_durable(cpu_rt, tmp_path / "x.store", dim=4, sync="never")
    with pytest.raises(ValueError, match="NUL"):
        mnemo.open_durable(cpu_rt, str(tmp_path / "z.store") + "\0tail", dim=4)
    with pytest.raises(ValueError, match="NUL"):
        mnemo.open_durable(cpu_rt, tmp_path / "z.store", dim=4, journal_path="j\0")
    assert not (tmp_path / "z.store").exists()
    mnemo.open_durable(cpu_rt, tmp_path / "y.store", dim=4).close()
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.open_durable(cpu_rt, tmp_path / "y.store", dim=5)
    assert exc.value.status == Status.E_SHAPE


def test_corrupt_journal_is_refused(cpu_rt, rng, tmp_path: Path) -> None:
    path = tmp_path / "c.store"
    journal = tmp_path / "c.journal"
    with mnemo.open_durable(cpu_rt, path, dim=8, journal_path=journal, sync="os") as store:
        for i in range(4):
            store.add([i], ref.randn(rng, (1, 8)))
    data = bytearray(journal.read_bytes())
    assert len(data) > 64
    data[len(data) // 3] ^= 0x5A  # inside a record that is not the last
    journal.write_bytes(bytes(data))
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.open_durable(cpu_rt, path, journal_path=journal)
    assert exc.value.status == Status.E_CORRUPT and exc.value.message
