"""Parsing LLM answers, the checker's Yes/No, task specs and configs, image limits, prices,
and how the other agent's messages are phrased for the machine (no network)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from pxp.agents.llm import phrase_other
from pxp.llm.base import LLMConfigError, Prompt, ProviderOptions, TextPart, Turn, parse_spec
from pxp.llm.images import prepare_image
from pxp.llm.pricing import cost_usd, price_of
from pxp.protocols.pxp.rules import Msg, Sender, Tag
from pxp.protocols.settings import SettingError
from pxp.protocols.text import clean_text
from pxp.tasks.custom import EXAMPLES, TaskConfigError, load_task_config, task_config
from pxp.tasks.drug import drug_spec
from pxp.tasks.rad import rad_spec
from pxp.tasks.registry import task_spec
from pxp.tasks.spec import FormatProblem, parse_fields, parse_yes_no

RAD = rad_spec({"labels": ["Atelectasis", "Pneumonia", "Pleural Effusion", "Cardiomegaly", "Pneumothorax"]})
DRUG = drug_spec({"few_shot": [{"target": "NNc1ccc(Br)nc1", "reactants": "Fc1ccc(Br)nc1.NN",
                                "explanation": "SNAr."}]})


@pytest.mark.parametrize("text", [
    "Prediction: Pleural Effusion\nExplanation: Blunted costophrenic angle.",
    "**Prediction:** Pleural Effusion\n**Explanation:** Blunted costophrenic angle.",
    "**Prediction**: pleural effusion\n\n**Explanation**: Blunted costophrenic angle.",
    "*Prediction: Pleural Effusion*\n*Explanation: Blunted costophrenic angle.*",
    "Prediction: Pleural Effusion Explanation: Blunted costophrenic angle.",
    "## Prediction\nPleural Effusion\n## Explanation\nBlunted costophrenic angle.",
    "- Prediction: `Pleural Effusion`\n- Explanation: Blunted costophrenic angle.",
    "Here is my answer.\nPrediction: Pleural effusion.\nExplanation: Blunted costophrenic angle.",
    '{"prediction": "Pleural Effusion", "explanation": "Blunted costophrenic angle."}',
])
def test_rad_answers_parse(text: str) -> None:
    assert RAD.parse(text) == ("Pleural Effusion", "Blunted costophrenic angle.")


def test_multiline_explanation_and_colons_inside() -> None:
    text = ("Prediction: Pneumothorax\nExplanation: Findings:\n- a visceral pleural line;\n"
            "- no lung markings beyond it, diagnosis: pneumothorax.\n")
    y, e = RAD.parse(text)
    assert y == "Pneumothorax"
    assert e == ("Findings:\n- a visceral pleural line;\n- no lung markings beyond it, diagnosis: "
                 "pneumothorax.")


def test_structured_answer_wins_over_text() -> None:
    assert RAD.parse("", {"prediction": "cardiomegaly", "explanation": "Big heart."}) == (
        "Cardiomegaly", "Big heart.")


@pytest.mark.parametrize("text, problem", [
    ("I cannot interpret images.", "no 'Prediction:'"),
    ("Prediction: Lung cancer\nExplanation: a mass", "must be exactly one of"),
    ("Prediction: Pneumonia and effusion\nExplanation: both", "must be exactly one of"),
    ("Prediction: Yes\nExplanation: present", "must be exactly one of"),
    ("Prediction: Pneumonia\nExplanation:", "Explanation is missing"),
    ("Explanation: only this", "Prediction is missing"),
])
def test_unusable_rad_answers_are_format_problems(text: str, problem: str) -> None:
    with pytest.raises(FormatProblem, match=problem):
        RAD.parse(text)


def test_json_nested_too_deeply_is_read_as_text_never_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for spec in (RAD, DRUG):
        with pytest.raises(FormatProblem, match="no '"):
            spec.parse('{"prediction": ' + deep + "}")
    assert RAD.parse(f'Prediction: Pneumonia\nExplanation: opacity {{"x": {deep}}}')[0] == "Pneumonia"


def test_label_match_is_equality_not_containment() -> None:
    assert RAD.match("pleural effusion", "Pleural Effusion.")
    assert not RAD.match("Effusion", "Pleural Effusion")


def test_drug_pathway_parsing_and_smiles() -> None:
    y, e = DRUG.parse("Pathway: Nc1ccc(O)cc1 . CC(=O)OC(C)=O\nExplanation: Acetylation.")
    assert y == "Nc1ccc(O)cc1.CC(=O)OC(C)=O" and e == "Acetylation."
    assert DRUG.match(y, "CC(=O)OC(C)=O.Nc1ccc(O)cc1")  # sets of canonical SMILES
    assert not DRUG.match(y, "CC(=O)Cl.Nc1ccc(O)cc1")
    with pytest.raises(FormatProblem, match="valid SMILES"):
        DRUG.parse("Pathway: CC(=O)Nc1ccc(O)cc\nExplanation: x")
    with pytest.raises(FormatProblem, match="valid SMILES"):
        DRUG.parse("Pathway: 4-aminophenol and acetic anhydride\nExplanation: x")


def test_drug_prompt_follows_example_2() -> None:
    system = DRUG.system_prompt()
    assert "You are a synthetic Chemist".lower() in system.lower()
    assert "Pathway: <the reactant SMILES" in system and "Fc1ccc(Br)nc1.NN" in system
    assert DRUG.max_tokens == 1024 and RAD.max_tokens == 300
    assert "Atelectasis, Pneumonia, Pleural Effusion, Cardiomegaly, Pneumothorax" in RAD.system_prompt()
    assert DRUG.schema().schema["required"] == ["prediction", "explanation"]


@pytest.mark.parametrize("text, verdict", [("Yes", True), ("no", False), ("**Yes.**", True), (" No.\n", False)])
def test_yes_no_strict(text: str, verdict: bool) -> None:
    assert parse_yes_no(text) is verdict


@pytest.mark.parametrize("text", ["Yes, they are consistent", "Maybe", "", "Yes and no", "The answer is yes"])
def test_yes_no_refuses_anything_else(text: str) -> None:
    with pytest.raises(FormatProblem):
        parse_yes_no(text)


@settings(deadline=None)  # no per-example time limit: a loaded machine is not a failure
@given(st.text(max_size=200))
def test_parse_never_crashes(text: str) -> None:
    for spec in (RAD, DRUG):
        try:
            y, e = spec.parse(text)
        except FormatProblem:
            continue
        assert y and e


_WORD = st.text(alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters=".,;()-/%"),
                min_size=1, max_size=12)


@settings(deadline=None)
@given(st.sampled_from(list(RAD.labels)), st.lists(_WORD, min_size=1, max_size=12),
       st.sampled_from(["", "**", "*"]))
def test_parse_round_trips_the_answer_format(label: str, words: list[str], emph: str) -> None:
    explanation = " ".join(words)
    text = f"{emph}Prediction:{emph} {label}\n{emph}Explanation:{emph} {explanation}"
    read = clean_text(explanation)  # a reply follows the text rule: NFC (docs/development.md "The text rule")
    assert RAD.parse(text) == (label, read.strip("*_`\"'").strip() or read)


def test_parse_fields_keeps_the_first_answer() -> None:
    f = parse_fields("Prediction: A\nExplanation: first\nPrediction: B")
    assert f["prediction"] == "A" and f["explanation"].startswith("first")


# --- phrasing by tag ------------------------------------------------------------------------


def test_other_agents_messages_are_phrased_by_tag() -> None:
    refute = Msg(2, Sender.HUMAN, Tag.REFUTE, "Pneumonia", "Consolidation.", match=False, agree=True)
    text = phrase_other(refute, RAD)
    assert text.startswith("The radiologist refutes your answer.")
    assert "The prediction is disputed; the explanation is accepted." in text
    assert text.endswith("Prediction: Pneumonia\nExplanation: Consolidation.")
    revise = Msg(4, Sender.HUMAN, Tag.REVISE, "Pneumonia", "x", match=True, agree=False)
    assert "revised their answer. The prediction is accepted, but the explanation is disputed." in (
        phrase_other(revise, RAD))
    assert "ratifies your answer" in phrase_other(Msg(4, Sender.HUMAN, Tag.RATIFY, "a", "b", True, True), RAD)
    reject = phrase_other(Msg(6, Sender.HUMAN, Tag.REJECT, "a", "b", False, False), DRUG)
    assert reject.startswith("The chemist rejects your answer. Both the prediction and the explanation")
    assert "Pathway: a" in reject


# --- custom task configs ---------------------------------------------------------------------


def test_example_config_and_registry() -> None:
    cfg = load_task_config(EXAMPLES / "adr_causality.toml")
    spec = task_spec("adr-causality", {"task_config": cfg.model_dump()})
    assert spec.match_kind == "label" and spec.agree_kind == "llm" and spec.prediction_field == "Causality"
    assert spec.parse("Causality: probable\nExplanation: fits")[0] == "Probable"
    assert task_spec("rad", {}, ["B", "A"]).labels == ("B", "A")
    assert task_spec("rad", {}).labels[0] == "Atelectasis"
    assert task_spec("something", {}).match_kind == "text"


def test_json_config_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"name": "free", "match": "text", "agree": "lexical",
                             "prompts": {"instance": "Question: {payload}"}}))
    spec = load_task_config(p).spec()
    assert spec.instance_text("why?") == "Question: why?" and spec.match("A b", "a  B")
    with pytest.raises(TaskConfigError, match="match"):
        task_config({"name": "x", "match": "regex"})
    with pytest.raises(TaskConfigError, match="labels"):
        task_config({"name": "x", "match": "label"})
    with pytest.raises(TaskConfigError, match="promts"):
        task_config({"name": "x", "promts": {}})
    bad = tmp_path / "bad.toml"
    bad.write_text("name = ")
    with pytest.raises(TaskConfigError, match="not valid toml"):
        load_task_config(bad)
    with pytest.raises(TaskConfigError, match="cannot read"):
        load_task_config(tmp_path / "missing.toml")


# --- providers: specs, options, images, prices ------------------------------------------------


def test_specs_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_spec("anthropic:claude-sonnet-4-6") == ("anthropic", "claude-sonnet-4-6")
    assert parse_spec("openai:hf.co/org/model:Q4") == ("openai", "hf.co/org/model:Q4")
    with pytest.raises(LLMConfigError):
        parse_spec("claude")
    monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "3")
    monkeypatch.setenv("PXP_LLM_TIMEOUT", "30")
    o = ProviderOptions.from_env("http://h", {"timeout": 5})
    assert (o.base_url, o.max_retries, o.timeout) == ("http://h", 3, 5.0)
    monkeypatch.setenv("PXP_LLM_MAX_RETRIES", "many")
    with pytest.raises(SettingError, match="PXP_LLM_MAX_RETRIES is 'many': allowed is a whole number"):
        ProviderOptions.from_env()
    with pytest.raises(LLMConfigError, match="timeout must be a number"):  # a run's own setting
        ProviderOptions.from_env(extra={"timeout": "soon", "max_retries": 1})


def _png(size: tuple[int, int], mode: str = "L") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, 128).save(buf, format="PNG")
    return buf.getvalue()


def test_images_are_downscaled_to_each_providers_limits() -> None:
    big = _png((4000, 3000))
    claude = prepare_image(big, "anthropic")
    assert max(claude.width, claude.height) <= 1568 and claude.width * claude.height <= 1_150_000
    assert Image.open(io.BytesIO(claude.data)).size == (claude.width, claude.height)
    gpt = prepare_image(big, "openai")
    assert min(gpt.width, gpt.height) <= 768
    small = _png((300, 200))
    assert prepare_image(small, "anthropic").data == small  # within limits: sent unchanged
    deep = io.BytesIO()
    Image.new("I;16", (2000, 1000), 40000).save(deep, format="PNG")
    img = prepare_image(deep.getvalue(), "anthropic")
    assert Image.open(io.BytesIO(img.data)).mode == "L" and max(img.width, img.height) <= 1568


def test_prompt_snapshot_has_no_image_bytes() -> None:
    part = prepare_image(_png((100, 100)), "anthropic", sha256="ab" * 32)
    snap = Prompt("sys", [Turn("user", [TextPart("x"), part])]).snapshot()
    assert snap["turns"][0]["parts"][1] == {"type": "image", "sha256": "ab" * 32, "media_type": "image/png",
                                            "width": 100, "height": 100}
    json.dumps(snap)


def test_prices() -> None:
    assert price_of("anthropic", "claude-haiku-4-5-20251001") is not None
    assert price_of("anthropic", "claude-opus-4-7") is None  # unknown: no guessed price
    assert price_of("openai", "llama3.1") is None
    c = cost_usd("anthropic", "claude-sonnet-4-6", tokens_in=1_000_000, tokens_out=0, cache_read=1_000_000,
                 cache_write=1_000_000)
    assert c == pytest.approx(3.0 + 0.3 + 3.75)


# --- MATCH on labels in any script --------------------------------------------------------------


def test_label_match_folds_case_accents_and_punctuation_but_keeps_every_script() -> None:
    """Normalisation must not erase letters outside ASCII: two different Chinese, Greek or
    Cyrillic labels are not equal, and a custom task's answer maps to its own label."""
    from pxp.tasks.base import match_label, match_text

    assert match_label("Pleural  effusion.", "pleural effusion")
    assert match_label("Épanchement pleural", "epanchement  PLEURAL")
    for a, b in [("肺炎", "气胸"), ("Πνευμονία", "Πνευμοθώρακας"), ("пневмония", "пневмоторакс")]:
        assert match_label(a, a) and not match_label(a, b)
        assert not match_text(a, b)
    assert match_label("ΠΝΕΥΜΟΝΊΑ", "πνευμονια")  # case and accents fold in Greek too
    spec = task_spec("rad", {}, ["肺炎", "气胸", "心脏肥大"])
    assert spec.check_prediction("气胸") == "气胸"
    with pytest.raises(FormatProblem):
        spec.check_prediction("肺不张")


def test_lexical_agree_reads_words_in_every_script() -> None:
    """Offline AGREE: explanations with no ASCII word are compared too (an empty bag of words
    made any two Chinese or Greek explanations agree)."""
    from pxp.tasks.base import lexical_agree, lexical_similarity

    a, b = "左下肺野斑片状实变影，可见支气管充气征", "心影增大，心胸比增大"
    assert not lexical_agree(a, b) and lexical_agree(a, a)
    assert lexical_agree(a, "左下肺野斑片状实变影")
    assert not lexical_agree("Διογκωμένη καρδιά", "Πλευριτική συλλογή υγρού")
    assert lexical_agree("Διογκωμένη καρδιά", "διογκωμένη ΚΑΡΔΙΑ")
    assert lexical_similarity("", "") == 1.0 and lexical_similarity("", "words") == 0.0
    assert lexical_similarity("The heart is enlarged.", "heart enlarged") == pytest.approx(1.0)
