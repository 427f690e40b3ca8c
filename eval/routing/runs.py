"""Routing runs: the classifier the evaluation builds, and every dataset's turns routed
in conversation order."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from scopehub.hub.routing import (
    AgentProfile,
    LocalClassifier,
    route,
)
from scopehub.memory import Message

from .. import _report
from ..holdout import Holdout, load_holdout
from ..loaders import Dialogue, Turn
from .metrics import (
    RoutingResult,
    agent_folds,
    fold_report,
    hide_examples,
    routing_metrics,
    split_train,
    summarize,
    unseen_metrics,
)
from .profiles import (
    GENERAL,
    build_profiles,
    clinc_profiles,
    dialogue_examples,
    file_beside,
    slot_descriptions,
    stable_hash,
)
from .router import RouterOptions, build_classifier, embedding_figures


def evaluate_routing(
    conversations: Sequence[Sequence[Turn]],
    classifier: LocalClassifier,
    *,
    window: int = 40,
    tail: int = 4,
    show_progress: bool = False,
) -> RoutingResult:
    """Route every user turn in conversation order; score the labelled ones."""
    result = RoutingResult()
    bar = _report.Progress(len(conversations), "routing", enabled=show_progress)
    for number, turns in enumerate(conversations):
        history: list[Message] = []
        handler: str | None = None
        for turn in turns:
            if turn.role != "user":
                history.append(_message(len(history), number, "agent", turn.text, handler))
                continue
            started, cpu = time.perf_counter(), time.process_time()
            decision = route(turn.text, classifier=classifier, window=history[-window:], tail=tail)
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
            result.cpu_ms.append((time.process_time() - cpu) * 1000)
            result.by_via[decision.via] += 1
            result.routed.append(decision.agent)
            handler = decision.agent
            history.append(_message(len(history), number, "user", turn.text, handler))
            if turn.agents:
                result.gold.append(turn.agents)
                result.predicted.append(decision.agent)
            else:
                result.unlabelled += 1
        bar.advance()
    bar.close()
    return result


def _message(index: int, conversation: int, role: str, text: str, agent: str | None) -> Message:
    return Message(id=index + 1, scope=f"user:eval{conversation}", role=role, text=text, ts=float(index), agent=agent)


def route_all(
    profiles: Sequence[AgentProfile],
    conversations: Sequence[Sequence[Turn]],
    options: RouterOptions | None = None,
    *,
    window: int = 40,
    show_progress: bool = False,
) -> tuple[RoutingResult, dict[str, Any]]:
    """Build the router over ``profiles`` and route every conversation with it."""
    classifier, info = build_classifier(profiles, options)
    result = evaluate_routing(conversations, classifier, window=window, show_progress=show_progress)
    if classifier.semantic is not None:
        # Routed messages whose evidence needed an embedding (the others cost none).
        info["embedded_share"] = round(classifier.embedded / max(1, len(result.routed)), 4)
    return result, info


def _holdout_report(holdout: Holdout, held_out: int, frozen: bool) -> dict[str, Any]:
    return {"file": "eval/data/frozen.json", "dataset": holdout.dataset, "frozen_items_in_path": held_out, "scored": "frozen" if frozen else "the rest"}


def run_clinc(
    path: str,
    split: str,
    train_path: str,
    train_split: str,
    *,
    per_agent: int,
    show_progress: bool,
    options: RouterOptions | None = None,
    folds: int = 0,
    unseen: int = 0,
    sample: int = 1,
    frozen: bool = False,
) -> dict[str, Any]:
    """CLINC150: in-scope domain accuracy, and where out-of-scope messages went.

    ``folds``: cross-validation on TRAIN_PATH's training split (examples from K-1 parts,
    the K-th routed). ``unseen``: K domains at a time lose their examples; the split is
    routed and their turns scored. The frozen messages of ``split`` (eval/data/frozen.json)
    are left out; ``frozen`` routes them alone.
    """
    from ..loaders import DatasetFormatError, load_clinc

    holdout = load_holdout("clinc150")
    profiles = clinc_profiles(train_path, train_split, per_agent=per_agent, holdout=holdout)
    domains_file = file_beside(path, "domains.json")
    items = load_clinc(path, split, domains_path=domains_file)
    with contextlib.suppress(DatasetFormatError):  # a file without out-of-scope items
        items += load_clinc(path, f"oos_{split}", domains_path=domains_file)
    rest, frozen_items = holdout.split_texts(items)
    if frozen and not frozen_items:
        raise click.UsageError(f"--frozen: {path} ({split}) holds none of the frozen messages (eval/data/frozen.json)")
    items = frozen_items if frozen else rest
    if sample > 1:
        items = [item for item in items if (stable_hash(item[0]) // 7) % sample == 0]
    # Each CLINC message stands alone: one conversation of one turn each.
    conversations = [[Turn(f"{split}:{i}", "user", text, (domain,) if domain else ())] for i, (text, domain) in enumerate(items)]
    result, classifier_info = route_all(profiles, conversations, options, show_progress=show_progress)
    # Out-of-scope turns were routed but not scored (no gold agent): where did they go?
    oos = [agent for agent, (_, domain) in zip(result.routed, items, strict=True) if domain is None]
    oos_total, oos_general = len(oos), oos.count(GENERAL)
    report = summarize(result)
    report["in_scope_accuracy"] = report["accuracy"]
    report["oos"] = oos_total
    report["oos_to_general"] = oos_general
    report["oos_to_general_rate"] = round(oos_general / oos_total, 4) if oos_total else None
    report["agents"] = len(profiles)
    report["holdout"] = _holdout_report(holdout, len(frozen_items), frozen)
    report.update(embedding_figures(classifier_info))
    accuracies: list[float] = []
    unseen_folds: list[dict[str, Any]] = []
    latencies: list[float] = []
    if folds > 1:
        train_items, _ = holdout.split_texts(load_clinc(train_path, train_split, domains_path=file_beside(train_path, "domains.json")))
        train_items = [item for item in train_items if item[1]]
        for fold in range(folds):
            fold_profiles = clinc_profiles(train_path, train_split, per_agent=per_agent, leave_out=(fold, folds), holdout=holdout)
            held = [item for item in train_items if stable_hash(item[0]) % folds == fold and (stable_hash(item[0]) // 7) % sample == 0]
            fold_result, info = route_all(fold_profiles, [[Turn(f"fold{fold}:{i}", "user", text, (domain,))] for i, (text, domain) in enumerate(held)], options)
            info.pop("_timed", None)
            accuracies.append(routing_metrics(fold_result.gold, fold_result.predicted)["accuracy"])
            latencies.extend(fold_result.latencies_ms)
            _progress(f"fold {fold + 1}/{folds}: accuracy {accuracies[-1]:.4f}", show_progress)
    if unseen > 0:
        domains = [profile.name for profile in profiles if profile.name != GENERAL]
        for number, hidden in enumerate(agent_folds(domains, unseen)):
            fold_result, info = route_all(hide_examples(profiles, hidden), conversations, options)
            info.pop("_timed", None)
            unseen_folds.append(unseen_metrics(fold_result.gold, fold_result.predicted, hidden))
            latencies.extend(fold_result.latencies_ms)
            _progress(f"unseen {number + 1}: {', '.join(hidden)}: {unseen_folds[-1]['accuracy']}", show_progress)
    report.update(fold_report(accuracies, unseen_folds, latencies))
    return report


def _progress(line: str, enabled: bool) -> None:
    if enabled:
        click.echo(line, err=True)


def _sampled(dialogues: Sequence[Dialogue], sample: int) -> list[Dialogue]:
    """Every ``sample``-th dialogue by stable hash (all of them for 1): lean runs on two cores."""
    if sample <= 1:
        return list(dialogues)
    return [d for d in dialogues if (stable_hash(d.id) // 7) % sample == 0]


def run_dialogues(
    fmt: str,
    path: str,
    train_path: str,
    *,
    per_agent: int,
    window: int,
    show_progress: bool,
    options: RouterOptions | None = None,
    folds: int = 0,
    unseen: int = 0,
    sample: int = 1,
    frozen: bool = False,
) -> dict[str, Any]:
    """SGD or MultiWOZ: every user turn, in conversation order.

    ``folds`` K > 1: with TRAIN_PATH = PATH, fold i takes its examples from the dialogues
    hashing to i modulo K and routes the others (leave dialogues out); with a separate
    TRAIN_PATH, PATH's dialogues are cut into K parts routed in turn. ``unseen`` K: K
    agents at a time lose their examples (leave agents out; fold j uses dialogue fold
    j modulo ``folds``). ``sample`` N routes every N-th test dialogue only.

    The frozen dialogues (eval/data/frozen.json) are left out of both sides; ``frozen``
    routes them alone, with examples from all the others (or from TRAIN_PATH).
    """
    from ..loaders import load_multiwoz, load_sgd, load_sgd_schema

    if frozen and folds > 1:
        raise click.UsageError("--frozen scores the frozen part once: drop --folds (the folds cross-validate the rest)")
    load = load_sgd if fmt == "sgd" else load_multiwoz
    holdout = load_holdout(fmt)
    dialogues, frozen_part = holdout.split(load(path))
    if frozen and not frozen_part:
        raise click.UsageError(f"--frozen: {path} holds none of the frozen dialogues (eval/data/frozen.json)")
    same = Path(train_path).resolve() == Path(path).resolve()
    schema = load_sgd_schema(path) if fmt == "sgd" else {}
    separate_train = None if same else holdout.split(load(train_path))[0]

    def setup(fold: int, parts: int) -> tuple[list[AgentProfile], list[Dialogue], list[Dialogue], dict[str, list[str]], set[str]]:
        if frozen:
            train, test = (separate_train if separate_train is not None else dialogues), frozen_part
        elif separate_train is None:
            train, test = split_train(dialogues, folds=parts, fold=fold)
        else:
            train = separate_train
            test = [d for d in dialogues if parts <= 1 or stable_hash(d.id) % parts == fold]
        descriptions = slot_descriptions(train)
        descriptions.update(schema)
        agents = {a for d in (*train, *test) for t in d.turns for a in t.agents} | set(descriptions)
        agents.discard(GENERAL)
        examples = dialogue_examples(train, per_agent=per_agent)
        return build_profiles(agents, descriptions, examples), train, _sampled(test, sample), examples, agents

    profiles, train, test, examples, agents = setup(0, 5 if separate_train is None else 1)
    result, info = route_all(profiles, [d.turns for d in test], options, window=window, show_progress=show_progress)
    report = summarize(result)
    report["agents"] = len(profiles)
    report["dialogues"] = len(test)
    report["train_dialogues"] = len(train)
    report["train_from_path"] = same
    report["sample"] = sample
    report["agents_without_examples"] = sorted(a for a in agents if not examples.get(a))
    report["holdout"] = _holdout_report(holdout, len(frozen_part), frozen)
    report.update(embedding_figures(info))
    accuracies: list[float] = []
    unseen_folds: list[dict[str, Any]] = []
    latencies: list[float] = []
    for fold in range(folds if folds > 1 else 0):
        fold_profiles, _, fold_test, _, _ = setup(fold, folds)
        fold_result, info = route_all(fold_profiles, [d.turns for d in fold_test], options, window=window)
        info.pop("_timed", None)
        accuracies.append(routing_metrics(fold_result.gold, fold_result.predicted)["accuracy"])
        latencies.extend(fold_result.latencies_ms)
        _progress(f"fold {fold + 1}/{folds}: accuracy {accuracies[-1]:.4f}", show_progress)
    if unseen > 0:
        for number, hidden in enumerate(agent_folds(agents, unseen)):
            if folds > 1:
                fold_profiles, _, fold_test, _, _ = setup(number % folds, folds)
            else:
                fold_profiles, fold_test = profiles, test
            fold_result, info = route_all(hide_examples(fold_profiles, hidden), [d.turns for d in fold_test], options, window=window)
            info.pop("_timed", None)
            unseen_folds.append(unseen_metrics(fold_result.gold, fold_result.predicted, hidden))
            latencies.extend(fold_result.latencies_ms)
            _progress(f"unseen {number + 1}: {', '.join(hidden)}: {unseen_folds[-1]['accuracy']}", show_progress)
    report.update(fold_report(accuracies, unseen_folds, latencies))
    return report
