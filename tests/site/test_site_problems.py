"""The list of what was not timed: a long reason that differs between cases only in its numbers is shown once,
readable (a headline, the whole message a part per line), each case with its own numbers where they differ."""

from __future__ import annotations

from sitefakes import CATALOG_META, record, write_run

# isort: split
from tierbench.suite.show.presentation import Presentation
from tierbench.suite.show.site import build, model
from tierbench.suite.store.runmeta import RunMeta


def _sdpa_reason(batch: int, seq: int) -> str:
    """SDPA's message for a grouped-query case it cannot run, as torch words it (sizes differ by case)."""
    sizes = f"Query.sizes(): [{batch}, 32, {seq}, 128], Key sizes(): [{batch}, 8, {seq}, 128]"
    return (
        "SDPA EFFICIENT_ATTENTION backend cannot run this case: Memory efficient kernel not used because: "
        "(Triggered internally at /pytorch/aten/src/ATen/native/transformers/cuda/sdp_utils.cpp:986.); "
        "For dense input, both fused kernels require query, key and value to have the same num_heads. "
        f"{sizes} instead. To broadcast dense inputs, try using unsqueeze and expand_to before passing them "
        "into the kernel. (Triggered internally at /pytorch/aten/src/ATen/native/transformers/sdp_utils_cpp.h:418.); "
        "Flash attention kernel not used because: (Triggered internally at "
        "/pytorch/aten/src/ATen/native/transformers/cuda/sdp_utils.cpp:988.); Flash attention has been runtime "
        "disabled. (Triggered internally at /pytorch/aten/src/ATen/native/transformers/sdp_utils_cpp.h:540.)"
    )


def _records() -> list:
    out = []
    for batch, seq in ((4, 4096), (1, 16384)):
        for causal in (False, True):
            case = {"batch": batch, "heads": 32, "kv_heads": 8, "seq": seq, "head_dim": 128, "causal": causal}
            case.update(dtype="bf16", mode="fwd")
            label = f"B{batch} H32/8 S{seq} D128" + (" causal" if causal else "")
            common = dict(op="attention", family="attention", case=case, case_id=f"attention/{label}", label=label)
            out.append(record(**common, x=float(seq), provider="sdpa-flash"))
            out.append(
                record(
                    **common,
                    x=float(seq),
                    provider="sdpa-efficient",
                    status="skipped",
                    reason=_sdpa_reason(batch, seq),
                    median_ms=None,
                )
            )
            off = 2 if seq == 4096 else 6
            out.append(
                record(
                    **common,
                    x=float(seq),
                    provider="triton",
                    tier="triton",
                    status="incorrect",
                    reason=f"dq: {off} of 33554432 elements are off by up to 0.1{off} of (rms + |ref|)",
                    median_ms=None,
                )
            )
    return out


def test_a_reason_differing_only_in_numbers_is_one_entry_with_a_readable_headline():
    records = _records()
    shown = Presentation.of([RunMeta("r", **CATALOG_META)])
    problems, numbers = model.problems(records, shown.view("attention", records), shown)
    assert [(p.status, p.provider, len(p.cases)) for p in problems] == [
        ("incorrect", "triton", 4),
        ("skipped", "sdpa-efficient", 4),
    ]
    incorrect, skipped = problems
    assert skipped.headline == (
        "SDPA EFFICIENT_ATTENTION backend cannot run this case: Memory efficient kernel not used because: "
        "For dense input, both fused kernels require query, key and value to have the same num_heads."
    )
    assert [p.split(":")[0] for p in skipped.details] == [
        "SDPA EFFICIENT_ATTENTION backend cannot run this case",
        "Flash attention kernel not used because",
    ]
    assert not any("Triggered internally" in part for part in skipped.details)
    assert "numbers in it differ by case" in skipped.note and "source pointers left out" in skipped.note
    assert not skipped.case_notes  # every case's headline is the same: nothing to add per case
    # The wrong-gradient counts differ per case: each case keeps its own numbers.
    assert sorted(set(incorrect.case_notes.values())) == [
        "dq: 2 of 33554432 elements are off by up to 0.12 of (rms + |ref|)",
        "dq: 6 of 33554432 elements are off by up to 0.16 of (rms + |ref|)",
    ]
    assert {numbers[r.key] for r in records if r.provider == "sdpa-efficient"} == {skipped.number}


def test_the_family_page_shows_the_long_message_once(tree):
    write_run(tree["runs"], "gqa", _records(), "attention")
    build.build(tree["runs"], tree["html"], tree["asv"], tree["ceilings"])
    html = (tree["html"] / "devices/nvidia-h100-80gb-hbm3/attention.html").read_text()
    problems = html.split('<ol class="problems">')[1].split("</ol>")[0]
    assert problems.count("To broadcast dense inputs") == 1  # four cases, one message
    assert problems.count("For dense input, both fused kernels") == 2  # its headline, and the whole message
    assert "Triggered internally at /pytorch" not in problems  # the pointers are said to be left out, and are
    assert problems.count("<details><summary>the whole message</summary>") == 1
