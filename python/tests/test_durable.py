"""Durable stores: writes survive a reopen (journal replay and checkpoint),
stats report the journal, a corrupt journal is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mnemo
import reference as ref
from mnemo import Status

DIM = 19


def test_reopen_after_writes_and_checkpoint(cpu_rt, rng: np.random.Generator,
                                            tmp_path: Path) -> None:
    path = tmp_path / "mem.mnemo"
    v = ref.randn(rng, (9, DIM))
    with pytest.raises(mnemo.MnemoError) as exc:  # no store and no dim
        mnemo.Store.open_durable(cpu_rt, path)
    assert exc.value.status == Status.E_IO
    store = mnemo.Store.open_durable(cpu_rt, path, DIM, metric="dot", sync="os")
    store.add(np.arange(10, 19), v)
    store.remove([12])
    store.set_bias([13], [0.5])
    st = store.stats()
    assert st["durable"] == 1 and st["vectors"] == 8 and st["journal_records"] == 3
    store.close()

    again = mnemo.Store.open_durable(cpu_rt, path)  # journal replayed
    assert len(again) == 8 and 12 not in again.search(v[2], 9)[0].tolist()
    np.testing.assert_array_equal(again.get(15), v[5])
    again.checkpoint()
    assert again.stats()["journal_records"] == 0
    again.add([40], v[0])
    again.close()
    third = mnemo.Store.open_durable(cpu_rt, path)
    assert len(third) == 9 and third.search(v[0], 1, apply_bias=False)[0][0] in (10, 40)
    third.close()
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.Store(cpu_rt, DIM).checkpoint()
    assert exc.value.status == Status.E_UNSUPPORTED


def test_corrupt_journal_refused(cpu_rt, rng: np.random.Generator, tmp_path: Path) -> None:
    path = tmp_path / "mem.mnemo"
    store = mnemo.Store.open_durable(cpu_rt, path, DIM, sync="os")
    for i in range(4):
        store.add([i], ref.randn(rng, (1, DIM)))
    store.close()
    journal = Path(str(path) + ".journal")
    data = bytearray(journal.read_bytes())
    data[len(data) // 3] ^= 0x5A  # a middle record, not a torn tail
    journal.write_bytes(bytes(data))
    with pytest.raises(mnemo.MnemoError) as exc:
        mnemo.Store.open_durable(cpu_rt, path)
    assert exc.value.status == Status.E_CORRUPT
