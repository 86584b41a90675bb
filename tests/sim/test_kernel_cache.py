"""`sim._kernel_cache.drop_stale_kernels`: a package's numba cache is dropped exactly when one of its sources changed
(numba itself checks only each kernel's own file)."""

from sim._kernel_cache import STAMP_NAME, drop_stale_kernels


def _cache_files(package):
    cache = package / "__pycache__"
    cache.mkdir(exist_ok=True)
    for name in ("kernels.step-10.py311.nbi", "kernels.step-10.py311.1.nbc"):
        (cache / name).write_bytes(b"machine code")
    return cache


def test_the_cache_is_dropped_when_any_source_changes_and_kept_otherwise(tmp_path):
    (tmp_path / "kernels.py").write_text("def step(): pass\n")
    (tmp_path / "laws.py").write_text("def law(): return 1\n")
    cache = _cache_files(tmp_path)
    assert drop_stale_kernels(tmp_path)  # no stamp yet: whatever is cached is of unknown sources
    assert sorted(p.name for p in cache.iterdir()) == [STAMP_NAME]
    _cache_files(tmp_path)
    assert not drop_stale_kernels(tmp_path)  # same sources: kept
    assert len(list(cache.glob("*.nb?"))) == 2
    (tmp_path / "laws.py").write_text("def law(): return 2\n")  # a callee's file, not the cached kernel's
    assert drop_stale_kernels(tmp_path)
    assert not list(cache.glob("*.nb?"))
