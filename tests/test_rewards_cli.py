"""`thesisgym score`: JSONL of completions against a saved DatasetDict split."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from test_rewards_fixtures import assemble, gold_thesis, make_row

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    import datasets
    rows = [make_row(), make_row(label="SELL", asof="2024-03-11", fwd_return=-0.03)]
    for r in rows:
        r["variation"] = 0
    split = datasets.Dataset.from_list(rows)
    path = tmp_path_factory.mktemp("score") / "ctx"
    datasets.DatasetDict({"test": split, "train": split}).save_to_disk(str(path))
    return path


def write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def run(*args):
    from thesisgym.cli import app

    return CliRunner().invoke(app, ["score", *map(str, args)])


def test_score_json_by_index_and_by_keys(dataset_dir, tmp_path):
    fabricated = gold_thesis().replace("[T1]", "[T9]")
    jsonl = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"index": 0, "completion": gold_thesis()},
            {
                "ticker": "AAPL",
                "asof": "2024-03-11",
                "completion": [{"role": "assistant", "content": assemble(decision="SELL")}],
            },
            {"index": 0, "completion": fabricated},
        ],
    )
    out = tmp_path / "scores.jsonl"
    result = run(
        jsonl, "--dataset", dataset_dir, "--split", "test", "--json", "--worst", "1", "--output", out
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["n"] == 3 and report["means"]["decision_reward"] == 1.0
    assert report["means"]["hallucination_rate"] == pytest.approx(1 / 24 / 3)
    assert report["worst"][0]["line"] == 3 and "unknown id T9" in report["worst"][0]["reason"]
    assert len(out.read_text().splitlines()) == 3


def test_score_table_output(dataset_dir, tmp_path):
    jsonl = write_jsonl(tmp_path / "c.jsonl", [{"index": 1, "completion": gold_thesis()}])
    result = run(jsonl, "--dataset", dataset_dir)
    assert result.exit_code == 0, result.output
    assert "hallucination rate" in result.output and "evidence" in result.output


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "c.jsonl:1: not valid JSON"),
        ('{"index": 0}', "c.jsonl:1: missing field 'completion'"),
        ('{"index": 7, "completion": "x"}', "1 indices out of range (first: line 1: index 7"),
        ('{"ticker": "MSFT", "asof": "2024-03-08", "completion": "x"}', "keys not in the split (first: line 1: ticker=MSFT"),
        ('{"completion": "x"}', "needs 'index'"),
        ('{"index": 0, "completion": 42}', "c.jsonl:1: field 'completion' must be a string"),
    ],
)
def test_score_bad_input_names_file_and_line(dataset_dir, tmp_path, line, message):
    path = tmp_path / "c.jsonl"
    path.write_text(line + "\n")
    result = run(path, "--dataset", dataset_dir)
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())


def test_score_unknown_split(dataset_dir, tmp_path):
    jsonl = write_jsonl(tmp_path / "c.jsonl", [{"index": 0, "completion": "x"}])
    result = run(jsonl, "--dataset", dataset_dir, "--split", "val")
    assert result.exit_code != 0 and "no split 'val'" in " ".join(result.output.split())


def test_score_uses_the_judge_s_so_fsr_and_dsr_are_the_training_rewards(dataset_dir, tmp_path):
    import datasets

    from thesisgym.consistency import ConsistencyVerifier, make_consistency_reward
    from thesisgym.rewards import dsr, fsr, make_combined_reward

    jsonl = write_jsonl(tmp_path / "c.jsonl", [{"index": 0, "completion": gold_thesis()}])
    out = tmp_path / "s.jsonl"
    assert run(jsonl, "--dataset", dataset_dir, "--json", "--output", out).exit_code == 0
    rec = json.loads(out.read_text())
    row = datasets.load_from_disk(str(dataset_dir))["test"][0]
    s = ConsistencyVerifier().score(gold_thesis(), row["evidence"], prompt=row.get("prompt")).s
    assert rec["s_is_placeholder"] == 0 and rec["s"] == pytest.approx(s)
    assert rec["fsr_paper"] == pytest.approx(fsr(rec["market"], s))
    assert rec["dsr_paper"] == pytest.approx(dsr(rec["market"], s))
    # the shipped (guarded) fsr/dsr columns are exactly what the GRPO recipe rewards pay
    columns = {k: [v] for k, v in row.items() if k != "prompt"}
    for kind in ("fsr", "dsr"):
        reward = make_combined_reward(kind, consistency=make_consistency_reward(judge="local"))
        [paid] = reward(prompts=[row["prompt"]], completions=[gold_thesis()], **columns)
        assert rec[kind] == pytest.approx(paid)
    # --judge none falls back to the placeholder, and says so
    plain = run(jsonl, "--dataset", dataset_dir, "--judge", "none", "--output", out)
    assert plain.exit_code == 0 and json.loads(out.read_text())["s_is_placeholder"] == 1
    assert "fsr/dsr are not the training rewards" in " ".join(plain.output.split())
