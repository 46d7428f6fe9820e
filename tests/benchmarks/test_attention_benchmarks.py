"""benchmarks/attention_scaling.py and benchmarks/long_range.py at their smallest sizes.

The sweep's stopping rule and the N=4096 ratios are checked on made-up measurements; one
real measurement runs in a subprocess (as the benchmark runs it) and one in this process;
the memory cap is checked on a real child. The retrieval task is checked for what its
docstring claims: the answers are right, the pairs are out of two local blocks' reach (their
outputs do not move when every far token changes, full attention's do), and a variant trains.
"""

import importlib.util
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scaling = _load("attention_scaling")
long_range = _load("long_range")


# ---------------------------------------------------------------------- attention_scaling
def _fake_measure(calls):
    """mha: 1 ms and 1 MiB x (N/256)^2, OOM from N=1024; local: linear; linear: fails at 512."""

    def measure(name, length):
        calls.append((name, length))
        grow = length / 256
        if name == "mha":
            if length >= 1024:
                return {"status": "OOM", "error": "cap"}
            return {"status": "ok", "seconds": 1e-3 * grow**2, "peak_bytes": 2**20 * grow**2}
        if name == "linear" and length == 512:
            return {"status": "error", "error": "ValueError: boom"}
        return {"status": "ok", "seconds": 1e-3 * grow, "peak_bytes": 2**20 * grow}

    return measure


def test_sweep_stops_each_variant_at_its_first_failure_and_the_tables_say_where():
    calls, lengths = [], (256, 512, 1024, 2048)
    variants = ["mha", "local", "linear"]
    results, stops = scaling.sweep(variants, lengths, _fake_measure(calls), log=lambda line: None)
    assert stops == {"mha": ("OOM", 1024), "linear": ("error", 512)}
    # Nothing is run past a stop; the others go on to the end, all variants at one N first.
    assert calls == [("mha", 256), ("local", 256), ("linear", 256), ("mha", 512), ("local", 512),
                     ("linear", 512), ("mha", 1024), ("local", 1024), ("local", 2048)]
    lines = "\n".join(scaling.tables(results, stops, variants, lengths))
    assert "stopped: OOM at N=1024" in lines
    assert "stopped: error at N=512" in lines
    assert "**OOM**" in lines and "**error**" in lines


def test_rounds_give_medians_and_a_stop_in_a_later_round_drops_the_earlier_figures():
    calls = []

    def measure(name, length):
        calls.append((name, length))
        round_index = sum(1 for call in calls if call == (name, length))  # 1, 2, 3
        if name == "local" and length == 512 and round_index == 2:
            return {"status": "time", "error": "cap"}
        return {"status": "ok", "seconds": length * round_index, "peak_bytes": 10 * round_index}

    results, stops = scaling.sweep(["mha", "local"], (256, 512, 1024), measure, rounds=3,
                                   log=lambda line: None)
    assert results[("mha", 512)]["seconds"] == 512 * 2  # median of 512, 1024, 1536
    assert results[("mha", 512)]["round_seconds"] == [512, 1024, 1536]
    assert results[("mha", 1024)]["peak_bytes"] == 20
    assert stops == {"local": ("time", 512)}
    assert results[("local", 512)]["status"] == "time"
    assert ("local", 1024) not in results  # measured in round 1, then stopped below it
    assert results[("local", 256)]["round_seconds"] == [256, 512, 768]
    assert calls.count(("local", 1024)) == 1 and calls.count(("local", 512)) == 2


def test_summary_at_4096_gives_speedup_memory_fraction_and_the_targets():
    n = scaling.REFERENCE_LENGTH
    results = {
        ("mha", n): {"status": "ok", "seconds": 1.0, "peak_bytes": 1000},
        ("linear", n): {"status": "ok", "seconds": 0.1, "peak_bytes": 50},  # 10x, 0.05: meets
        ("local", n): {"status": "ok", "seconds": 0.25, "peak_bytes": 50},  # 4x: misses
        ("performer", n): {"status": "OOM"},
        ("synthesizer", n): {"status": "ok", "seconds": 2.0, "peak_bytes": 2000},
    }
    summary = scaling.summary_at(results, ["mha", "linear", "local", "performer", "synthesizer"])
    assert summary["linear"]["speedup"] == pytest.approx(10.0)
    assert summary["linear"]["memory_fraction"] == pytest.approx(0.05)
    assert summary["linear"]["meets"] is True
    assert summary["local"]["speedup"] == pytest.approx(4.0)
    assert summary["local"]["meets"] is False
    assert summary["performer"]["speedup"] is None and summary["performer"]["meets"] is None
    assert summary["synthesizer"]["memory_fraction"] == pytest.approx(2.0)
    assert summary["synthesizer"]["meets"] is None  # quadratic: no target


def test_the_verdict_uses_the_planned_memory_where_there_is_one():
    n = scaling.REFERENCE_LENGTH
    results = {
        ("mha", n): {"status": "ok", "seconds": 1.0, "peak_bytes": 1000, "planned_bytes": 800},
        # resident 0.2 of mha's, planned 0.05: the plan decides
        ("linear", n): {"status": "ok", "seconds": 0.1, "peak_bytes": 200, "planned_bytes": 40},
        # resident 0.05, planned 0.25: misses
        ("performer:m=64", n): {"status": "ok", "seconds": 0.1, "peak_bytes": 50,
                                "planned_bytes": 200},
    }
    summary = scaling.summary_at(results, ["mha", "linear", "performer:m=64"])
    assert summary["linear"]["planned_fraction"] == pytest.approx(0.05)
    assert summary["linear"]["memory_fraction"] == pytest.approx(0.2)
    assert summary["linear"]["meets"] is True
    assert summary["performer:m=64"]["meets"] is False  # an extra row is judged as its variant
    lines = "\n".join(scaling.tables(results, {}, ["mha", "linear", "performer:m=64"], (n,)))
    assert "| linear | O(N) | 100.0 | 10.0x | 0.0 | 0.050 | 0.0 | 0.200 | yes |" in lines


def test_ratios_pair_the_figures_of_one_round():
    n = scaling.REFERENCE_LENGTH
    # Round 2 is loaded (everything twice as slow); the medians of the figures would pair
    # mha's round-2 time with linear's round-1 time (2.0 / 0.1 = 20x); per round it is 10x.
    results = {
        ("mha", n): {"status": "ok", "seconds": 2.0, "round_seconds": [1.0, 2.0, 2.0],
                     "peak_bytes": 1000, "round_peaks": [1000, 1000, 900]},
        ("linear", n): {"status": "ok", "seconds": 0.1, "round_seconds": [0.1, 0.2, 0.1],
                        "peak_bytes": 100, "round_peaks": [100, 100, 90]},
    }
    summary = scaling.summary_at(results, ["mha", "linear"])
    assert summary["linear"]["speedup"] == pytest.approx(10.0)
    assert summary["linear"]["memory_fraction"] == pytest.approx(0.1)


def test_xla_planned_bytes_takes_the_largest_report(tmp_path):
    assert scaling.xla_planned_bytes(str(tmp_path / "missing")) is None
    for name, total in (("module_0000.step.cpu-memory-usage-report.txt", 1000),
                        ("module_0001.step.cpu-memory-usage-report.txt", 250000)):
        (tmp_path / name).write_text(f"Total bytes used: {total} (0.24MiB)\n\nAllocations...\n")
    (tmp_path / "module_0001.step.buffer-assignment.txt").write_text("Total bytes used: 9999999\n")
    assert scaling.xla_planned_bytes(str(tmp_path)) == 250000


def test_an_extra_row_builds_its_variant_at_its_settings():
    assert scaling.variant_of("performer:m=64") == "performer"
    layer = scaling.build_layer("performer:m=64", 128)
    assert type(layer).__name__ == "PerformerAttention" and layer.num_features == 64
    assert scaling.attention_kwargs("linformer:k=128", 512) == {
        "projected_length": 128, "max_length": 512}


def test_an_extra_row_takes_its_variants_colour_with_its_own_dashes():
    styles = scaling.line_styles(["mha", "local", "performer", "performer:m=128",
                                  "performer:m=64", "linear"])
    assert styles["mha"]["color"] == "black"
    assert [styles[n]["color"] for n in ("local", "performer", "linear")] == ["C0", "C1", "C2"]
    assert styles["performer:m=128"]["color"] == styles["performer:m=64"]["color"] == "C1"
    assert "linestyle" not in styles["performer"]
    assert styles["performer:m=128"]["linestyle"] != styles["performer:m=64"]["linestyle"]


def test_settings_put_the_length_where_asked():
    assert scaling.attention_kwargs("linformer", 2048)["max_length"] == 2048
    assert scaling.attention_kwargs("local", 2048) == {"window": 128}
    assert scaling.attention_kwargs("mha", 2048) == {}


def test_one_real_measurement_in_a_subprocess():
    result = scaling.measure("mha", 128, repeats=2, time_cap=60)
    assert result["status"] == "ok", result
    assert len(result["times"]) == 2 and result["seconds"] > 0
    assert result["peak_bytes"] >= 0 and result["memory_probe"]
    # XLA's plan of the step at N=128: at least x, g, dx (3 x 128 x 256 floats) and the weights
    assert result["planned_bytes"] >= (3 * 128 * 256 + 4 * 256 * 256) * 4


def test_the_memory_cap_kills_the_child():
    result = scaling.measure("mha", 128, memory_cap_bytes=2**20)
    assert result["status"] == "OOM" and "cap" in result["error"]


def test_one_real_measurement_in_process(tmp_path):
    result = scaling.measure_in_process("local", 128, repeats=1, report=lambda record: None)
    assert result["status"] == "ok" and result["seconds"] > 0
    results = {("local", 128): result, ("mha", 128): {"status": "OOM"}}
    path = tmp_path / "scaling.png"
    scaling.plot(results, {"mha": ("OOM", 128)}, ["mha", "local"], (128,), str(path))
    assert path.stat().st_size > 1000


# ---------------------------------------------------------------------- long_range
SETTINGS = long_range.settings_for(quick=True)  # window 8
LENGTH = 64


def test_the_answers_are_the_values_of_the_queried_keys_and_the_pairs_are_far():
    far = long_range.reach(SETTINGS)
    assert far == long_range.QUERIES - 1 + 2 * 8
    tokens, answers = long_range.make_batch(np.random.default_rng(0), 32, LENGTH, far)
    assert tokens.shape == (32, LENGTH) and answers.shape == (32, long_range.QUERIES)
    for row, answer in zip(tokens, answers):
        pairs = {int(t - long_range.PAIR0) // long_range.VALUES: int(t - long_range.PAIR0) % long_range.VALUES
                 for t in row if t >= long_range.PAIR0}
        assert len(pairs) == long_range.PAIRS  # distinct keys
        assert np.all(row[: far + 1][long_range.QUERIES:] < long_range.QUERY0)  # fillers only near
        queried = row[: long_range.QUERIES] - long_range.QUERY0
        assert [pairs[int(k)] for k in queried] == list(answer)


def _far_perturbed(tokens, far, rng):
    changed = tokens.copy()
    changed[:, far + 1:] = rng.integers(1, long_range.VOCAB, size=changed[:, far + 1:].shape)
    return changed


@pytest.mark.parametrize("name, moves", [("local", False), ("mha", True)])
def test_two_local_blocks_cannot_see_the_pairs_full_attention_can(name, moves):
    import keras

    keras.utils.set_random_seed(0)
    model = long_range.build_model(name, LENGTH, SETTINGS)
    rng = np.random.default_rng(1)
    far = long_range.reach(SETTINGS)
    tokens, _ = long_range.make_batch(rng, 4, LENGTH, far)
    before = np.asarray(model(tokens))
    after = np.asarray(model(_far_perturbed(tokens, far, rng)))
    assert before.shape == (4, long_range.QUERIES, long_range.VALUES)
    assert (np.max(np.abs(before - after)) > 1e-4) == moves


def test_a_variant_trains_for_its_budget_and_is_scored(tmp_path):
    held_out = long_range.make_batch(np.random.default_rng(2), 32, LENGTH, long_range.reach(SETTINGS))
    # Half a second of steps: the budget is wall time, all of it spent on the CPU.
    result = long_range.train_variant("local", LENGTH, 0.5, held_out, SETTINGS, xla=False,
                                      log=lambda line: None)
    assert result["steps"] >= 2 and result["train_seconds"] >= 0.5
    assert 0.0 <= result["accuracy"] <= 1.0 and result["seconds_per_step"] > 0
    assert len(result["curve"]) == long_range.CURVE_POINTS + 1
    results = {"local": result, "mha": {"error": "ValueError: boom"}}
    assert "**error**" in "\n".join(long_range.table(results, ["mha", "local"]))
    path = tmp_path / "long_range.png"
    long_range.plot(results, ["mha", "local"], str(path), 1 / long_range.VALUES)
    assert path.stat().st_size > 1000


@pytest.mark.parametrize("chosen", [False, True])
def test_a_run_of_named_variants_records_a_section_of_its_own(tmp_path, monkeypatch, chosen):
    """The table of every variant is replaced only by a run of every variant."""
    recorded = []
    monkeypatch.setattr(long_range, "replace_results_section",
                        lambda prefix, title, command, lines, notes: recorded.append(
                            (prefix, title, command)))  # fmt: skip
    results = {"mha": {"error": "ValueError: boom"}, "aft": {"error": "ValueError: boom"}}
    long_range.publish(results, ["mha", "aft"], SETTINGS, 1024, 120.0, True,
                       str(tmp_path / "p.png"), True, "code: test", chosen=chosen)
    (prefix, title, command), = recorded
    if chosen:
        assert prefix == "Long-range retrieval, mha and aft:" and title.startswith(prefix)
        assert command.endswith("--budget 120 --variants mha aft")
    else:
        assert prefix == long_range.TITLE_PREFIX and "--variants" not in command
