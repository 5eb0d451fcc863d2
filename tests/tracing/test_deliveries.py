"""The ack path's lean delivery spans: the SDK's sampling rule on the trace id, the
context propagated either way, a bounded queue that drops instead of waiting, and the
export process's spans as the SDK makes them."""

from __future__ import annotations

import marshal
import threading
import time

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from bot.tracing import deliveries
from bot.tracing.deliveries import MAX_QUEUE, DeliverySpans, Recorded
from bot.tracing.otlp import Encoder

ENCODER = Encoder({"service.name": "bot-web"})


def recorder(ratio: float, sent: list[list[Recorded]]) -> DeliverySpans:
    return DeliverySpans(ratio, sent.append, delay=3600)


@pytest.mark.parametrize("ratio", [0.0, 1.0])
def test_a_delivery_is_recorded_as_sampled_and_its_context_always_goes_on(ratio: float) -> None:
    sent: list[list[Recorded]] = []
    spans = recorder(ratio, sent)
    with spans.delivery("/webhooks/github", "github") as delivery:
        assert deliveries.current() is delivery
        parent = delivery.delivered("issues", "labeled", "d-1")
        delivery.answered(202, "queued")
        delivery.update({"bot.webhook.note": "extra"})
        delivery.fail("500")
        assert parent == delivery.traceparent
    spans.close()
    assert deliveries.current() is None
    version, trace, span, flags = parent.split("-")
    assert (version, len(trace), len(span)) == ("00", 32, 16)
    assert flags == ("01" if ratio else "00")  # the worker's sampler follows it
    if not ratio:
        assert sent == []
        return
    [[recorded]] = sent
    assert recorded[0] == int(trace, 16) and recorded[1] == int(span, 16)
    # encoded as the collector reads it (after the pipe to the export process)
    recorded = marshal.loads(marshal.dumps(recorded))  # noqa: S302
    request = ExportTraceServiceRequest()
    request.ParseFromString(ENCODER.request([ENCODER.span(recorded)] * 2))
    [resource_spans] = request.resource_spans
    assert [(a.key, a.value.string_value) for a in resource_spans.resource.attributes] == [
        ("service.name", "bot-web")
    ]
    [scope] = resource_spans.scope_spans
    assert scope.scope.name == "bot" and len(scope.spans) == 2
    made = scope.spans[0]
    assert (made.trace_id.hex(), made.span_id.hex()) == (trace, span)
    assert made.name == "POST /webhooks/github" and made.kind == Span.SPAN_KIND_SERVER
    assert made.end_time_unix_nano >= made.start_time_unix_nano > 0
    assert made.flags & 0xFF == 1
    assert {a.key: _plain(a.value) for a in made.attributes} == {
        "http.request.method": "POST", "http.route": "/webhooks/github", "bot.forge": "github",
        "bot.webhook.event": "issues", "bot.webhook.action": "labeled",
        "http.response.status_code": 202, "bot.webhook.outcome": "queued",
        "bot.webhook.delivery": "d-1", "bot.webhook.note": "extra", "error.type": "500",
    }  # fmt: skip
    assert made.status.code == Status.STATUS_CODE_ERROR and made.status.message == "500"


def _plain(value: AnyValue) -> object:
    return getattr(value, value.WhichOneof("value") or "string_value")


def test_every_attribute_type_is_encoded_as_the_proto_says() -> None:
    values = {"s": "é", "t": True, "f": False, "i": 7, "n": -3, "d": 0.25,
              "a": ["x", "y"], "b": [1, 2]}  # fmt: skip
    recorded = (5, 6, "x", "internal", 1, 2, (), ("", "", 0, ""), "", values, "")
    request = ExportTraceServiceRequest()
    encoder = Encoder({})
    request.ParseFromString(encoder.request([encoder.span(recorded)]))
    [made] = request.resource_spans[0].scope_spans[0].spans
    decoded = {a.key: a.value for a in made.attributes}
    assert {k: _plain(v) for k, v in decoded.items() if k not in ("a", "b")} == {
        "s": "é",
        "t": True,
        "f": False,
        "i": 7,
        "n": -3,
        "d": 0.25,
    }
    assert [v.string_value for v in decoded["a"].array_value.values] == ["x", "y"]
    assert [v.int_value for v in decoded["b"].array_value.values] == [1, 2]
    assert made.kind == Span.SPAN_KIND_INTERNAL and not made.HasField("status")


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


def test_a_delivery_takes_ids_made_ahead_and_makes_its_own_when_none_are_left() -> None:
    """The request path does not make random ids or format them: the recorder's thread has
    them ready (and makes more after each batch); a burst that used them all still gets
    valid ids of its own."""
    sent: list[list[Recorded]] = []
    spans = recorder(1.0, sent)
    ready = len(spans.made)
    trace, span, parent, sampled = spans.made[-1]
    with spans.delivery("/webhooks/github", "github") as delivery:
        assert delivery.delivered("issues", "labeled", "d-1") == parent
        assert delivery.trace_id == f"{trace:032x}" and sampled
    assert parent == f"00-{trace:032x}-{span:016x}-01"
    assert len(spans.made) == ready - 1
    spans.made.clear()
    with spans.delivery("/webhooks/github", "github") as delivery:
        own = delivery.delivered("issues", "labeled", "d-2")
    _, own_trace, own_span, flags = own.split("-")
    assert (
        flags == "01" and own_trace != f"{trace:032x}" and int(own_trace, 16) and int(own_span, 16)
    )
    for _ in range(deliveries.BATCH):  # a batch wakes the thread: it sends, then makes more
        with spans.delivery("/webhooks/github", "github"):
            pass
    deadline = time.monotonic() + 10
    while len(spans.made) < deliveries.MADE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(spans.made) == deliveries.MADE
    spans.close()
    recorded = [r for batch in sent for r in batch]
    assert [r[:2] for r in recorded[:2]] == [(trace, span), (int(own_trace, 16), int(own_span, 16))]
