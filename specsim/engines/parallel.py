"""A replica past one TP group or one node: the engines' parallel flags, one command per node.

Each engine records the flags it takes for data and expert parallelism and for a launch over
several nodes in its YAML (`speculative.parallel`, read from the released wheel); an engine
without that block cannot be given such a layout, and `parallel_commands` says so. Two ways of
counting the TP flag are recorded:

- `tp_spans: group` (vLLM): the TP flag is one TP group; EP / TP data-parallel groups of it
  make up the expert group (`--data-parallel-size`, `--enable-expert-parallel`: EP = TP x DP).
- `tp_spans: replica` (SGLang): the TP flag is every GPU of the replica; the experts go over
  `--ep-size` of them and attention runs in EP / TP data-parallel groups of TP GPUs each.

`batch_cap_counts` says whether the batch cap (the last flag of every command) is one TP
group's (vLLM: each data-parallel rank is an engine of its own) or the replica's (SGLang: each
attention-DP rank gets the cap over their number), so a command carries the batch of each TP
group it was computed for.

Over several nodes every node runs the same command with its own rank, the first node's
address given as the word HEAD_IP (the user's to replace). An engine that runs one MPI world
over the nodes instead (TensorRT-LLM: `launcher`) gets one command, started once, whose
launcher lists the nodes (HEAD_IP, NODE1_IP, ...) with their GPUs. An engine whose attention
data parallelism runs attention at TP 1 only (`attention_dp_flag` absent) cannot run TP groups
of several GPUs beside a wider expert group.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from specsim.engines.base import EngineAdapter, EngineCommand

# The word a user replaces with the first node's address.
HEAD_ADDRESS = "HEAD_IP"


def nodes_of(tp: int, ep: int, gpus_per_node: int) -> int:
    """Nodes one replica of TP `tp` and EP `ep` takes (max(tp, ep) GPUs; at least one)."""
    return max(1, -(-max(tp, ep) // gpus_per_node))


def _layout_flags(rules: dict[str, Any], tp_flag: str, argv: list[str], tp: int,
                  ep: int, label: str) -> list[str] | str:
    """`argv` with the layout's TP, DP and EP flags, or why the engine cannot express it."""
    gpus = max(tp, ep)
    if rules.get("tp_spans") == "replica":
        out = _with_value(argv, tp_flag, gpus)
        if ep > 1:
            out = _with_value(out, str(rules["expert_parallel_flag"]), ep)
        if ep > tp:
            if "attention_dp_flag" not in rules:
                return (f"{label} runs attention data-parallel at TP 1 only "
                        f"({rules.get('attention_dp', 'no attention-DP flag')}): TP {tp} "
                        f"groups beside {ep} expert GPUs are not a layout it runs")
            out += [str(rules["attention_dp_flag"]), str(ep // tp)]
        return out
    if ep > 1 and ep % tp:  # EP = TP x DP: a group of fewer experts than TP is not a layout
        return f"{label} spreads experts over TP x DP GPUs: EP {ep} is not a multiple of TP {tp}"
    out = list(argv)
    if ep > tp:
        out += [str(rules["data_parallel_flag"]), str(ep // tp)]
    if ep > 1:
        out.append(str(rules["expert_parallel_switch"]))
    return out


def _without_schedule(argv: list[str], flag: str, key: str, cap: int) -> list[str]:
    """`argv` whose JSON value of `flag` holds no per-batch schedule `key` ([[first, last, k],
    ...]): an engine that drops it with data parallelism (vLLM 0.33.0) would run the longest
    chain at every batch, so the command states the chain of its batch cap instead (none where
    that is 0: the speculative flag goes)."""
    if flag not in argv:
        return argv
    i = argv.index(flag)
    config = json.loads(argv[i + 1])
    schedule = config.pop(key, None)
    if not schedule:
        return argv
    k = next((entry[2] for entry in schedule if entry[0] <= cap <= entry[1]), schedule[-1][2])
    if k == 0:
        return [*argv[:i], *argv[i + 2:]]
    config["num_speculative_tokens"] = k
    return [*argv[:i + 1], json.dumps(config, separators=(",", ":")), *argv[i + 2:]]


def _with_value(argv: list[str], flag: str, value: int) -> list[str]:
    """`argv` with `flag` set to `value` (replaced where present, appended where not)."""
    if flag in argv:
        i = argv.index(flag)
        return [*argv[:i + 1], str(value), *argv[i + 2:]]
    return [*argv, flag, str(value)]


def parallel_commands(engine: EngineAdapter, command: EngineCommand, *, tp: int, ep: int,
                      gpus_per_node: int, tail: tuple[str, ...]) -> list[EngineCommand]:
    """`command` (a one-replica command at TP `tp` whose argv ends with the batch-cap flags
    `tail`) for a replica of TP `tp` and EP `ep`: one command per node it spans, each with the
    layout's flags inserted before the cap flags; the command itself where nothing changes; a
    refusal where the engine records no parallel flags."""
    nodes = nodes_of(tp, ep, gpus_per_node)
    if (ep <= 1 and nodes == 1) or not command.argv:
        return [command]
    rules = engine.args.rules.get("parallel")
    if not isinstance(rules, dict):
        return [engine.refuse(f"{engine.label} records no data-, expert-parallel or multi-node "
                              f"flags ({engine.args.path}: speculative.parallel)")]
    cap = len(tail)
    if tuple(command.argv[len(command.argv) - cap:]) != tail:
        raise ValueError(f"{engine.slug} command does not end with its cap flags {tail}")
    head = list(command.argv[:len(command.argv) - cap])
    flags = _layout_flags(rules, engine.args.tp_flag, head, tp, ep, engine.label)
    if isinstance(flags, str):
        return [engine.refuse(flags)]
    if rules.get("batch_cap_counts") == "replica" and ep > tp:  # the cap counts every group
        tail = (*tail[:-1], str(int(tail[-1]) * (ep // tp)))
    if rules.get("data_parallel_drops") and rules.get("tp_spans") == "group" and ep > tp:
        flags = _without_schedule(flags, str(engine.args.rules.get("flag", "")),
                                  str(rules["data_parallel_drops"]), int(tail[-1]))
    if nodes == 1:
        return [dataclasses.replace(command, argv=(*flags, *tail))]
    if "launcher" in rules:  # one MPI world over the nodes, started once
        hosts = ",".join(f"{HEAD_ADDRESS if n == 0 else f'NODE{n}_IP'}:{gpus_per_node}"
                         for n in range(nodes))
        launcher = [str(word).format(gpus=max(tp, ep), hosts=hosts)
                    for word in rules["launcher"]]
        return [dataclasses.replace(command, argv=(*launcher, *flags, *tail))]
    address = HEAD_ADDRESS + (f":{rules['address_port']}" if "address_port" in rules else "")
    out = []
    for rank in range(nodes):
        launch = [str(rules["nodes_flag"]), str(nodes), str(rules["node_rank_flag"]), str(rank),
                  str(rules["address_flag"]), address]
        if rank and rules.get("worker_switch"):
            launch.append(str(rules["worker_switch"]))
        out.append(dataclasses.replace(command, argv=(*flags, *launch, *tail),
                                       node=(rank, nodes)))
    return out
