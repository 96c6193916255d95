//! One computer's WebSocket link: the hello handshake, then frames in until the link ends.
//!
//! Nothing a computer sends can crash the bridge: a malformed frame is logged, counted and dropped.

use crate::computer::{Computer, Identity};
use crate::protocol::{self, Chunk, Inbound, Outbound, PROTOCOL_VERSION, RemoteError, Response};
use crate::reassembly::Step;
use crate::state::State;
use crate::untrusted;
use bridge_core::link::log_limit::LogLimit;
use bridge_core::link::{Admission, WsConnection, WsSender, parse_id};
use serde_json::Value;
use std::sync::Arc;

/// Why a link is closed when a newer one from the same computer id replaces it.
const REPLACED: &str = "replaced by a newer link from the same computer id";

pub async fn run(state: Arc<State>, conn: WsConnection) {
    let WsConnection {
        id: link_id,
        peer,
        mut incoming,
        sender,
        ..
    } = conn;
    let first = tokio::select! {
        first = incoming.recv() => first,
        () = tokio::time::sleep(state.cfg.hello_timeout) => {
            tracing::warn!(link = link_id, ?peer, "no hello in time; closing");
            sender.close("expected a hello frame first");
            return;
        }
    };
    let Some(first) = first else { return };
    let hello = match protocol::decode(&first) {
        Ok(Inbound::Hello(h)) => h,
        Ok(_) => return reject(&state, &sender, "the first frame must be a hello").await,
        Err(e) => {
            state.count_malformed();
            return reject(&state, &sender, &format!("malformed hello: {e}")).await;
        }
    };
    if hello.protocol != PROTOCOL_VERSION {
        let why = format!(
            "protocol version {} is not supported (this bridge speaks {PROTOCOL_VERSION}); reinstall the client",
            hello.protocol
        );
        return reject(&state, &sender, &why).await;
    }
    let identity = Identity {
        id: hello.computer_id,
        label: hello.computer_label,
        kind: hello.kind,
        host: hello.host,
    };
    let computer = Arc::new(Computer::new(
        identity.clone(),
        link_id,
        sender.clone(),
        state.cfg.max_in_flight,
        state.reassembly_gauge(),
    ));
    let timeout = state.cfg.probe_timeout;
    let admission = state
        .registry
        .judge(identity.id, state.cfg.on_duplicate, |holder| async move {
            // Busy: its probe slots are taken by other probes; a holder that cannot be asked keeps its id.
            match holder.probe(timeout).await {
                Ok(_) => true,
                Err(e) => e.code() == bridge_core::ErrorCode::Busy,
            }
        })
        .await;
    if let Admission::Refused { holder } = admission {
        state.dispute(identity.id, holder.link_id);
        return reject(&state, &sender, &duplicate_reason(&holder)).await;
    }
    let ok = Outbound::HelloOk {
        protocol: PROTOCOL_VERSION,
        max_in_flight: state.cfg.max_in_flight,
        max_frame: protocol::MAX_FRAME,
    };
    if let Ok(frame) = protocol::encode(&ok)
        && sender.send_text(frame).await.is_err()
    {
        return;
    }
    if let Some(old) = state
        .registry
        .insert(identity.id, computer.clone(), REPLACED)
    {
        state.settle(identity.id, old.link_id);
        tracing::info!(
            computer = identity.id,
            old_link = old.link_id,
            new_link = link_id,
            "computer relinked; old link replaced"
        );
        state.publish_link(
            "replaced",
            &old.identity,
            Some("a newer link from the same computer id"),
        );
    }
    tracing::info!(computer = identity.id, label = ?identity.label, kind = identity.kind.as_str(), ?peer, "computer linked");
    state.publish_link("connected", &identity, None);

    computer
        .peer()
        .serve(incoming, |text| {
            computer.touch();
            match protocol::decode(&text) {
                Ok(Inbound::Response(r)) => deliver(&computer, r),
                Ok(Inbound::Chunk(c)) => reassemble(&state, &computer, c),
                Ok(Inbound::Event(e)) => {
                    state.computer_events.publish(untrusted::computer_event(
                        identity.id,
                        computer.label(),
                        e.event,
                        e.args,
                    ));
                }
                Ok(Inbound::Hello(h)) if h.computer_id == identity.id => {
                    // The client says hello again when the player relabels the computer.
                    if computer.set_label(h.computer_label.clone()) {
                        tracing::info!(computer = identity.id, label = ?h.computer_label, "computer relabelled");
                        let who = Identity {
                            label: h.computer_label,
                            ..identity.clone()
                        };
                        state.publish_link("relabelled", &who, None);
                    }
                }
                Ok(Inbound::Hello(h)) => {
                    tracing::warn!(
                        computer = identity.id,
                        other = h.computer_id,
                        "hello with another id on one link; ignored"
                    )
                }
                Err(e) => {
                    let n = state.count_malformed();
                    static LOG: LogLimit = LogLimit::new();
                    if let Some(left_out) = LOG.allow() {
                        tracing::warn!(computer = identity.id, error = %e, total = n, left_out, "malformed frame dropped");
                    }
                }
            }
        })
        .await;
    computer.partials().clear();
    let reason = sender
        .close_reason()
        .unwrap_or_else(|| "link closed".into());
    computer.link_lost();
    // Removed before settled: a dispute is recorded only while the registry holds its holder (`State::dispute`),
    // so one recorded after this is impossible and one recorded before is settled here.
    let removed = state.registry.remove_link(identity.id, link_id);
    state.settle(identity.id, link_id);
    if removed {
        tracing::info!(computer = identity.id, reason = %reason, "computer unlinked");
        state.publish_link("disconnected", &identity, Some(&reason));
    }
}

/// Why a computer is refused when another live machine holds its id: shown on its screen by the client.
pub fn duplicate_reason(holder: &Computer) -> String {
    format!(
        "computer id {} is already linked from another machine that is still running ({}); two computers \
         share this id (a copied computer or a second world): give one of them another id",
        holder.id(),
        holder.describe()
    )
}

/// Tells the peer why, then closes: the close goes out after the queued reason.
async fn reject(state: &State, sender: &WsSender, why: &str) {
    let n = state.count_refused();
    tracing::warn!(reason = why, total = n, "link refused");
    if let Ok(frame) = protocol::encode(&Outbound::HelloRejected { error: why }) {
        let _ = sender.send_text(frame).await;
    }
    sender.close(why);
}

fn deliver(computer: &Computer, r: Response) {
    match parse_id(&Value::String(r.id.clone())) {
        Some(id) => {
            computer.correlator().resolve(id, r.outcome);
        }
        None => {
            static LOG: LogLimit = LogLimit::new();
            if let Some(left_out) = LOG.allow() {
                let id = bridge_core::text::for_log(&r.id);
                tracing::warn!(computer = computer.id(), %id, left_out, "response with an id the bridge never uses; dropped")
            }
        }
    }
}

fn reassemble(state: &State, computer: &Computer, c: Chunk) {
    // Under the partials' lock: a request that ends drops its partial under it too, after it stopped pending
    // (`Computer::request_on`), so no chunk is kept for a request that has ended.
    let mut partials = computer.partials();
    let Some(id) =
        parse_id(&Value::String(c.id.clone())).filter(|id| computer.correlator().is_pending(*id))
    else {
        drop(partials);
        // Not an answer anyone waits for (never asked, timed out, cancelled): keeping it could only grow.
        let n = state.count_malformed();
        tracing::debug!(
            computer = computer.id(),
            id_bytes = c.id.len(),
            total = n,
            "chunk for no request in flight dropped"
        );
        return;
    };
    let step = partials.add(id, c.id.len(), c.seq, &c.data, c.last);
    drop(partials);
    let fail = |ids: Vec<u64>, why: String, too_large: bool| {
        for id in ids {
            tracing::warn!(computer = computer.id(), id, reason = %why, "chunked reply abandoned");
            computer.correlator().resolve(
                id,
                Err(RemoteError {
                    message: format!("the bridge dropped its chunked reply: {why}"),
                    code: too_large.then(|| "too_large".to_owned()),
                    data: Value::Null,
                }),
            );
        }
    };
    match step {
        Step::Held => {}
        Step::Dropped {
            ids,
            why,
            too_large,
        } => fail(ids, why, too_large),
        Step::Whole(text) => match protocol::parse(&text) {
            Ok(Inbound::Response(r)) if r.id == c.id => deliver(computer, r),
            Ok(_) => fail(
                vec![id],
                "chunks did not form a reply to this request".into(),
                false,
            ),
            Err(e) => {
                state.count_malformed();
                fail(vec![id], format!("chunked reply is malformed: {e}"), false);
            }
        },
    }
}
