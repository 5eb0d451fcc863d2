"""The ack path's lean delivery spans: recorded as what is at hand (no ids, nothing added
to the inbox row), their ids derived from the delivery's key (the worker derives the same
parent), row-less spans salted, the SDK's sampling rule on the derived trace id in both
processes, a bounded queue that drops instead of waiting, and the export process's spans
(templates filled in) as the OTLP proto reads them."""

from __future__ import annotations

import hashlib
import marshal
import threading
import time
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from bot import tracing
from bot.tracing import deliveries, ids
from bot.tracing.deliveries import MAX_QUEUE, DeliverySpans, Recorded
from bot.tracing.otlp import Encoder

ENCODER = Encoder({"service.name": "bot-web"})
KEY = "github:42:delivery-1"


def recorder(ratio: float, sent: list[list[Recorded]]) -> DeliverySpans:
    return DeliverySpans(ratio, sent.append, delay=3600)


def decoded(encoder: Encoder, batch: list[Any]) -> list[Span]:
    """The spans the encoder writes for ``batch`` (after the pipe), as the collector reads
    them."""
    batch = marshal.loads(marshal.dumps(batch))  # noqa: S302
    request = ExportTraceServiceRequest()
    request.ParseFromString(encoder.request(encoder.spans(batch)))
    [resource_spans] = request.resource_spans
    [scope] = resource_spans.scope_spans
    assert scope.scope.name == "bot"
    return list(scope.spans)


def _plain(value: AnyValue) -> object:
    return getattr(value, value.WhichOneof("value") or "string_value")


def attributes(span: Span) -> dict[str, object]:
    return {a.key: _plain(a.value) for a in span.attributes}


def blake(key: str) -> bytes:
    return hashlib.blake2b(key.encode(), digest_size=24, person=b"bot-delivery").digest()


def test_the_ack_path_records_what_is_at_hand_and_the_ids_come_from_the_key() -> None:
    sent: list[list[Recorded]] = []
    spans = recorder(1.0, sent)
    payload = {"name": "issues"}
    with spans.delivery("/webhooks/github", "github") as delivery:
        assert deliveries.current() is delivery
        tracing.stamp_event(payload, "issues", "labeled", "d-1", KEY)
        tracing.answered(delivery, 202, "queued")
    spans.close()
    assert deliveries.current() is None
    assert payload == {"name": "issues"}  # nothing added to the inbox row
    [[recorded]] = sent
    route, forge, start, end, *rest = recorded
    assert (route, forge) == ("/webhooks/github", "github") and end >= start > 0
    assert rest == ["issues", "labeled", 202, "queued", "d-1", KEY, (), ""]

    [made] = decoded(ENCODER, [recorded])
    digest = blake(KEY)
    assert (made.trace_id, made.span_id) == (digest[:16], digest[16:])
    assert delivery.trace_id == digest[:16].hex()
    assert delivery.traceparent == f"00-{digest[:16].hex()}-{digest[16:].hex()}-01"
    assert made.name == "POST /webhooks/github" and made.kind == Span.SPAN_KIND_SERVER
    assert (made.start_time_unix_nano, made.end_time_unix_nano) == (start, end)
    assert made.flags & 0xFF == 1 and not made.parent_span_id
    assert attributes(made) == {
        "http.request.method": "POST", "http.route": "/webhooks/github", "bot.forge": "github",
        "bot.webhook.event": "issues", "bot.webhook.action": "labeled",
        "http.response.status_code": 202, "bot.webhook.outcome": "queued",
        "bot.webhook.delivery": "d-1",
    }  # fmt: skip
    assert not made.HasField("status")


def test_the_worker_continues_the_trace_of_the_row_from_its_key() -> None:
    """The worker's dispatch span is the child of the span the export process writes for
    the delivery that made the row; a row from before (with a ``traceparent``) keeps it;
    the bot's own rows (no key) start a trace of their own."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        with tracing.dispatch_span({"name": "issues"}, 1, 0, KEY):
            pass
        old = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
        with tracing.dispatch_span({"name": "issues", "trace_context": {"traceparent": old}},
                                   2, 0, KEY):  # fmt: skip
            pass
        with tracing.dispatch_span({"name": "poll"}, 3, 0, ""):
            pass
    finally:
        tracing.uninstall()
    new, kept, own = exporter.get_finished_spans()
    [hook] = decoded(ENCODER, [("/webhooks/github", "github", 1, 2, "issues", "labeled", 202,
                                "queued", "d-1", KEY, {}, "")])  # fmt: skip
    assert new.parent is not None and new.parent.is_remote
    assert new.context.trace_id.to_bytes(16, "big") == hook.trace_id
    assert new.parent.span_id.to_bytes(8, "big") == hook.span_id
    assert kept.parent is not None and f"{kept.parent.span_id:016x}" == "cd" * 8
    assert f"{kept.context.trace_id:032x}" == "ab" * 16
    assert own.parent is None


def test_a_span_that_made_no_row_gets_a_span_id_of_its_own() -> None:
    """A duplicate (the same key as the row's delivery) stays in the row's trace with a
    span id salted by its start time; refusals without a key get both ids salted; no two
    spans share a span id, in one export process or two."""
    row = ("/webhooks/github", "github", 10, 20, "issues", "labeled", 202, "queued", "d-1", KEY,
           {}, "")  # fmt: skip
    duplicate = (*row[:7], "duplicate delivery: already queued", *row[8:])
    later = (row[0], row[1], 11, 21, *duplicate[4:])
    unstored = (*row[:6], 503, "the bot could not store this delivery", *row[8:])
    refused = ("/webhooks/github", "github", 10, 20, "", "", 401, "bad signature", "", "", {},
               "")  # fmt: skip
    refused_later = (*refused[:2], 12, 22, *refused[4:])
    batch = [row, duplicate, later, unstored, refused, refused_later]
    first = decoded(Encoder({}), batch)
    second = decoded(Encoder({}), batch)  # another web process: another salt
    digest = blake(KEY)
    assert first[0].span_id == second[0].span_id == digest[16:]  # the row's: derived
    span_ids = {s.span_id for s in first} | {s.span_id for s in second[1:]}
    assert len(span_ids) == 2 * len(batch) - 1
    assert all(s.trace_id == digest[:16] for s in first[:4])  # the key's trace
    assert first[4].trace_id != first[5].trace_id != digest[:16]
    assert all(len(s.trace_id) == 16 and any(s.trace_id) and any(s.span_id) for s in first)


def test_sampling_below_one_is_decided_alike_in_the_web_process_and_the_worker() -> None:
    ratio = 0.5
    keys = [f"github:42:delivery-{n}" for n in range(64)]
    batch = [("/webhooks/github", "github", 1, 2, "issues", "labeled", 202, "queued", f"d-{n}",
              key, {}, "") for n, key in enumerate(keys)]  # fmt: skip
    exported = {s.span_id for s in decoded(Encoder({}, ratio=ratio), batch)}
    assert 0 < len(exported) < len(keys)

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider, sample_ratio=ratio)
    try:
        for n, key in enumerate(keys):
            with tracing.dispatch_span({"name": "issues"}, n, 0, key):
                pass
    finally:
        tracing.uninstall()
    parents = {s.parent.span_id.to_bytes(8, "big") for s in exporter.get_finished_spans()
               if s.parent is not None}  # fmt: skip
    assert parents == exported
    # TraceIdRatioBased itself agrees on each derived trace id
    rule = TraceIdRatioBased(ratio)
    for key in keys:
        digest = blake(key)
        kept = rule.should_sample(None, int.from_bytes(digest[:16], "big"), "x").decision
        assert kept.is_sampled() == (digest[16:] in exported)


def test_a_ratio_of_zero_keeps_nothing() -> None:
    sent: list[list[Recorded]] = []
    spans = recorder(0.0, sent)
    with spans.delivery("/webhooks/github", "github") as delivery:
        delivery.delivered("issues", "labeled", "d-1", KEY)
        assert delivery.traceparent.endswith("-00") and not delivery.recording
    spans.close()
    assert sent == []


@pytest.mark.parametrize("delivery", ["d-1", "", "x" * 150])
def test_a_filled_template_decodes_as_the_span_written_from_its_parts(delivery: str) -> None:
    """Many shapes through the templates (route, event, action, status, outcome, the
    delivery id's length), each a span the proto reads with every field where it
    belongs; spans with other attributes or an error are written from their parts."""
    encoder = Encoder({"service.name": "bot-web"})
    batch: list[Any] = []
    for n, (route, forge) in enumerate([("/webhooks/github", "github"),
                                        ("/webhooks/gitlab", "gitlab")] * 3):  # fmt: skip
        status, outcome = [(202, "queued"), (202, "ignored"), (401, "bad")][n % 3]
        start = 1_700_000_000_000_000_000 + n
        event, action = "note" if n % 2 else "issues", "" if n == 3 else "open"
        batch.append((route, forge, start, start + 5000 + n, event, action, status, outcome,
                      delivery, f"k-{n}", {}, ""))  # fmt: skip
    batch.append((*batch[0][:10], {"bot.webhook.note": "x", "n": 3}, "500"))
    spans = decoded(encoder, batch * 2)  # the second time from the templates kept
    assert len(spans) == 2 * len(batch)
    for made, recorded in zip(spans, batch * 2, strict=True):
        route, forge, start, end, event, action, status, outcome = recorded[:8]
        assert made.name == f"POST {route}" and made.kind == Span.SPAN_KIND_SERVER
        assert (made.start_time_unix_nano, made.end_time_unix_nano) == (start, end)
        if outcome == "queued":
            digest = blake(recorded[9])
            assert (made.trace_id, made.span_id) == (digest[:16], digest[16:])
        expected: dict[str, object] = {
            "http.request.method": "POST", "http.route": route, "bot.forge": forge,
            "bot.webhook.event": event, "bot.webhook.action": action,
            "http.response.status_code": status, "bot.webhook.outcome": outcome,
            "bot.webhook.delivery": delivery, **recorded[10],
        }  # fmt: skip
        if recorded[11]:
            expected["error.type"] = recorded[11]
            assert made.status.code == Status.STATUS_CODE_ERROR
            assert made.status.message == "500"
        assert attributes(made) == {k: v for k, v in expected.items() if v != ""}


def test_every_attribute_type_is_encoded_as_the_proto_says() -> None:
    values = {"s": "é", "t": True, "f": False, "i": 7, "n": -3, "d": 0.25,
              "a": ["x", "y"], "b": [1, 2]}  # fmt: skip
    recorded = ("/x", "github", 1, 2, "", "", 0, "", "", "", values, "")
    [made] = decoded(Encoder({}), [recorded])
    got = {a.key: a.value for a in made.attributes}
    assert {k: _plain(v) for k, v in got.items() if k in values and k not in ("a", "b")} == {
        "s": "é",
        "t": True,
        "f": False,
        "i": 7,
        "n": -3,
        "d": 0.25,
    }
    assert [v.string_value for v in got["a"].array_value.values] == ["x", "y"]
    assert [v.int_value for v in got["b"].array_value.values] == [1, 2]
    assert not made.HasField("status")


def test_a_full_queue_drops_spans_and_never_waits() -> None:
    """The export process is stuck (its pipe full): deliveries go on, spans are dropped."""
    sent: list[list[Recorded]] = []
    stuck = threading.Event()

    def send(batch: list[Recorded]) -> None:
        stuck.wait(30)
        sent.append(batch)

    spans = DeliverySpans(1.0, send, delay=3600)
    total = 3 * MAX_QUEUE
    started = time.monotonic()
    for _ in range(total):
        with spans.delivery("/webhooks/github", "github"):
            pass
    assert time.monotonic() - started < 10  # no delivery waited for the export
    assert spans.dropped >= total - MAX_QUEUE - deliveries.BATCH
    stuck.set()
    spans.close()
    assert sum(len(batch) for batch in sent) + spans.dropped == total
    assert max(len(batch) for batch in sent) <= deliveries.BATCH


def test_the_derived_context_is_a_valid_traceparent() -> None:
    digest = blake(KEY)
    assert ids.traceparent(KEY, 1.0) == f"00-{digest[:16].hex()}-{digest[16:].hex()}-01"
    assert ids.traceparent(KEY, 0.0).endswith("-00")
    assert tracing.trace_id_of(ids.traceparent(KEY, 1.0)) == digest[:16].hex()
