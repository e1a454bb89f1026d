"""Hostile clients against a real broker, while a good producer and consumer keep working.

    python -m mqstore.scripts.survival.hostile [--connections 500] [--frames 200] [--seconds 3] [--rss-limit-mb 1024]

Starts ``mqstore start`` on a tiny-geometry store in a temporary directory (ipc sockets, or TCP with
CURVE with ``--tcp``) and runs each attack in turn, every one bounded in count and time:

- ``oversized_frames``     frames past the ingress and reader size limits, and a body past the store's
- ``big_frame_flood``      frames just under the ingress limit, sent as fast as the socket takes them
- ``slow_readers``         long-poll and full pulls from DEALERs that never read a reply
- ``connection_flood``     many connections, each its own DEALER identity, a request each, then gone
- ``ack_group_flood``      ack-mode pulls for thousands of new groups (each a queue index on a reader)
- ``topic_flood``          a send to each of thousands of new topics (each auto-created)
- ``remoting_garbage``     the RocketMQ remoting front (TCP): frames past its limit, random headers, frames
                           cut short, heartbeats sent and never read
- ``bad_key_flood``        (``--tcp``) connections with CURVE keys the broker never issued, or none
- ``invalid_msgpack``      random bytes, truncated maps, non-maps, wrong versions, extra frames, and
                           producer-encoded sends in every malformed multipart shape
- ``wrong_types``          every field of every request given values of the wrong type or range
- ``offsets_beyond_max``   consumer offsets past a queue's end, negative, past 2**63
- ``keyed_admin``          (``--tcp``) a CURVE key let in with produce and consume but not admin (``roles.toml``)
                           deleting a topic, creating one, deleting offsets, resetting a group
- ``notice_snooping``      (``--tcp``) the client's key subscribing to the internal notice streams
- ``remoting_acl``         the front with an ACL file: anonymous, wrong-secret and forged-account requests
                           (``acl_attacks``) while a signed client sends and pulls
- ``ha_port_plain``        a SYNC_MASTER's replication port guarded by ``allowed_slaves``, and
  ``ha_port_secret``       one guarded by ``secret``, each with a real slave (``ha_attacks``: forged reports,
                           a connected broker id claimed again, no or a wrong secret, a trickled handshake,
                           garbage, a connection flood, an address not allowed); their own brokers, in ``ha``

Prints one JSON verdict: per attack what the broker answered (reply statuses counted), whether the
good client was served meanwhile (its sends during the attack all PUT_OK, none waiting longer than
``--max-latency-s``) and the broker's RSS (all processes) before, at peak and after; then ``ok``:
every attack answered without a SYSTEM_ERROR, no actor restarted, the good client always served and
its consumer caught up, and peak RSS under the limit. Exit status 0 when ok.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zmq

from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.scripts.harness import Broker, free_port_range, wait_for
from mqstore.scripts.survival.hostile import acl_attacks, ipc_attacks
from mqstore.scripts.survival.hostile.attacks import ATTACKS, Attacks
from mqstore.scripts.survival.hostile.ha_attacks import HA_ATTACKS, run_ha_attacks
from mqstore.scripts.survival.hostile.observers import GoodClient, Rss
from mqstore.scripts.survival.hostile.resource_attacks import FRONT_TOML, RESOURCE_ATTACKS, run_front_attacks


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="mqstore-hostile-", dir=args.dir))
    ha = [a for a in args.attacks if a in HA_ATTACKS]
    if not set(args.attacks) - set(HA_ATTACKS):  # the replication port alone: its brokers are its own
        verdict: dict[str, Any] = {"ha": run_ha_attacks(root / "ha", ha, args.seconds, args.ha_connections)}
        verdict.update(findings=verdict["ha"]["findings"], ok=not verdict["ha"]["findings"])
        return verdict
    broker_extra = (f"max_request_bytes = {args.max_request_bytes}\ningress_hwm = {args.ingress_hwm}\n"
                    f"reader_hwm = {args.reader_hwm}\nack_max_queues = {args.ack_max_queues}")
    ports = free_port_range(14)  # 12 for ZeroMQ over TCP (9 roles, readers), then the remoting front, the metrics
    front = [a for a in args.attacks if a in RESOURCE_ATTACKS]
    acl = acl_attacks.acl_setting(root) if "remoting_acl" in args.attacks else ""
    remoting = FRONT_TOML.replace("[remoting]\n", f"[remoting]\n{acl}", 1) if front else (
        f"\n[remoting]\n{acl}" if acl else "")
    broker = Broker(root, broker_extra=broker_extra, tcp_port=ports if args.tcp else None,
                    extra_toml=f"\n[store]\nmax_body_bytes = {args.max_message_bytes}\n{remoting}",
                    remoting_port=ports + 12 if {"remoting_garbage", "remoting_acl"} & set(args.attacks) or front
                    else None,
                    metrics_port=ports + 13 if front else None)
    if args.tcp:
        ipc_attacks.grant_roles(broker.keys_dir)
    verdict = {"attacks": {}, "tcp": args.tcp, "config": {
        "max_request_bytes": args.max_request_bytes, "ingress_hwm": args.ingress_hwm, "reader_hwm": args.reader_hwm,
        "max_body_bytes": args.max_message_bytes, "ack_max_queues": args.ack_max_queues}}
    with broker:
        endpoints = broker.endpoints()
        ctx: zmq.Context[Any] = zmq.Context() if endpoints.curve is None else _curve_context(endpoints)
        good = GoodClient(endpoints).start()
        rss = Rss(broker.proc.pid if broker.proc else os.getpid())
        attacks = Attacks(ctx, endpoints, args, broker.remoting_port)
        attacks.role_keys_dir = broker.keys_dir if args.tcp else None
        try:  # whatever happens, the clients close: a context with open sockets would hang the exit
            wait_for(lambda: good.received, 30, "the good consumer's first message")
            rss.start()
            verdict["rss_before_mb"] = round(rss.now() / 2**20, 1)
            for name in (a for a in args.attacks if a not in RESOURCE_ATTACKS and a not in HA_ATTACKS):
                verdict["attacks"][name] = _attack(attacks, name, good, rss, args)
            if front:
                verdict["front"] = run_front_attacks(broker, front, args.seconds, args.front_connections, ports + 13,
                                                      acl_attacks.LEGIT if acl else None)
                attacks.findings += verdict["front"]["findings"]
        finally:
            good.stop()
            rss.stop()
            ctx.destroy(0)
        status = broker.status() or {}
        restarts = {a: i.get("restarts", 0) for a, i in status.get("actors", {}).items() if i.get("restarts")}
        verdict.update(rss_peak_mb=round(rss.peak / 2**20, 1), rss_after_mb=round(rss.now() / 2**20, 1),
                       rss_peak_by_process_mb=_by_actor(rss.peak_by_pid, status),
                       restarts=restarts, good_sent=sum(1 for _, _, s, _ in good.sent if s == "PUT_OK"),
                       good_received=len(good.received), good_caught_up=good.caught_up(),
                       good_errors=good.errors[:5])
        verdict["broker_exit"] = broker.stop()
    findings = attacks.findings
    if ha:
        verdict["ha"] = run_ha_attacks(root / "ha", ha, args.seconds, args.ha_connections)
        findings += verdict["ha"]["findings"]
    findings += [f"{a} restarted {n} time(s)" for a, n in restarts.items()]
    if not verdict["good_caught_up"]:
        findings.append("the good consumer did not receive every acknowledged message")
    if verdict["rss_peak_mb"] > args.rss_limit_mb:
        findings.append(f"broker RSS peaked at {verdict['rss_peak_mb']} MiB, past {args.rss_limit_mb}")
    verdict.update(findings=findings, ok=not findings)
    return verdict


def _attack(attacks: Attacks, name: str, good: GoodClient, rss: Rss, args: argparse.Namespace) -> dict[str, Any]:
    """One attack, and how the good client and the broker's memory fared meanwhile."""
    start = time.monotonic()
    peak_before = rss.peak
    rss.peak = rss.now()
    try:
        answered: Any = getattr(attacks, name)()
    except Exception as exc:  # the harness's own failure is a finding too, not a crash of the run
        answered = {"harness_error": f"{type(exc).__name__}: {exc}"}
        attacks.findings.append(f"{name}: {answered['harness_error']}")
    time.sleep(0.3)  # the good client's next sends land after the attack too
    served = good.window(start, time.monotonic())
    outcome = {"answered": answered, "good_client": served, "rss_peak_mb": round(rss.peak / 2**20, 1),
               "seconds": round(time.monotonic() - start, 2)}
    rss.peak = max(rss.peak, peak_before)
    if not served["served"]:
        attacks.findings.append(f"{name}: the good client was not served ({served['statuses']})")
    elif served["max_latency_s"] > args.max_latency_s:
        attacks.findings.append(f"{name}: a good send waited {served['max_latency_s']} s")
    return outcome


def _by_actor(peaks: dict[int, int], status: dict[str, Any]) -> dict[str, float]:
    """Peak RSS per actor (and the supervisor), in MiB; processes that are neither go by pid."""
    names = {info.get("pid"): name for name, info in status.get("actors", {}).items()}
    names[status.get("pid")] = "supervisor"
    return {str(names.get(pid, pid)): round(rss / 2**20, 1) for pid, rss in peaks.items()}


def _curve_context(endpoints: Endpoints) -> zmq.Context[Any]:
    from mqstore.ipc.transport.curve import CurveContext
    return CurveContext(endpoints.curve)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m mqstore.scripts.survival.hostile", description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", type=int, default=500)
    p.add_argument("--frames", type=int, default=200, help="frames per attack that sends many")
    p.add_argument("--flood-frames", type=int, default=40, help="big frames in the flood")
    p.add_argument("--slow-readers", type=int, default=20)
    p.add_argument("--topics", type=int, default=3000, help="new topics in the topic flood")
    p.add_argument("--ack-groups", type=int, default=3000, help="new ack-mode groups in the group flood")
    p.add_argument("--ack-max-queues", type=int, default=256, help="the broker's [broker] ack_max_queues")
    p.add_argument("--seconds", type=float, default=3.0, help="how long an attack waits for replies")
    p.add_argument("--max-request-bytes", type=int, default=8 << 20, help="the broker's ingress frame limit")
    p.add_argument("--max-message-bytes", type=int, default=4 << 20, help="the store's max message size")
    p.add_argument("--ingress-hwm", type=int, default=64, help="the broker's [broker] ingress_hwm")
    p.add_argument("--reader-hwm", type=int, default=64, help="the broker's [broker] reader_hwm")
    p.add_argument("--rss-limit-mb", type=float, default=1024)
    p.add_argument("--max-latency-s", type=float, default=5.0, help="a good send waiting longer is a finding")
    p.add_argument("--attacks", nargs="*", default=list(ATTACKS + RESOURCE_ATTACKS + HA_ATTACKS),
                   choices=ATTACKS + RESOURCE_ATTACKS + HA_ATTACKS)
    p.add_argument("--ha-connections", type=int, default=100, help="connections in the HA port's flood")
    p.add_argument("--front-connections", type=int, default=1030, help="idle connections in the front's flood")
    p.add_argument("--tcp", action="store_true", help="ZeroMQ over TCP with CURVE instead of ipc sockets")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--dir", help="where the temporary store goes")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    verdict = run(parse_args(argv))
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

