"""`python -m aiko.warmup`, which `make` runs after installing: it must keep reaching every simulator it names (a
moved or renamed entry point would otherwise surface as a silent 20 s compile in a user's first run)."""

from aiko import warmup


def test_warmup_compiles_every_simulator_with_a_progress_line_each(capsys):
    assert warmup.main(["--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [name for name, _, _ in warmup.KERNELS]
    for i, name in enumerate(names, 1):
        assert f"[{i}/{len(names)}] compiling the {name}" in "\n".join(lines)
    assert lines[-1].startswith("numba kernels ready")


def test_the_default_warms_what_make_run_needs_only(capsys):
    defaults = [name for name, _, default in warmup.KERNELS if default]
    assert defaults == ["3D snake simulator and its HIL plant (paper 000; `make run`)"]
    assert warmup.main([]) == 0
    assert capsys.readouterr().out.count("compiling") == 1
