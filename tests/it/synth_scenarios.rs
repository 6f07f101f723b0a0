//! `sqos synth` scenarios checked from the outside: the capture is read back from its bytes
//! (synth_common) and what the clients reported is recomputed from the READ/WRITE on the wire.

use std::collections::{BTreeMap, HashMap};

use crate::synth_common::*;
use sqos::smb2::Command;
use sqos::synth::{Scenario, SynthConfig};

/// One UPDATE_COUNTERS request as found on the wire, with the I/O recomputed for its interval.
#[derive(Debug)]
struct Update {
    flow: String,
    first_frame: u64,
    last_frame: u64,
    reported: (u64, u64, u64, Option<u64>),
    observed: (u64, u64, u64, u64),
    latency: u64,
}

/// An I/O seen on the wire.
struct WireIo {
    key: (usize, u64),
    len: u32,
    req_first: u64,
    req_ts: u64,
    resp_frame: u64,
    resp_ts: u64,
}

struct Parsed {
    msgs: Vec<Msg>,
}

impl Parsed {
    fn new(bytes: Vec<u8>) -> Parsed {
        Parsed {
            msgs: smb2_messages(&read_capture(bytes)),
        }
    }

    /// (conn, FileId) → logical flow, from successful SET_LOGICAL_FLOW_ID requests.
    fn opens(&self) -> HashMap<(usize, u64), String> {
        let mut map = HashMap::new();
        for ex in exchanges(&self.msgs) {
            let (Some((fid, buf, _)), Some(resp)) = (sqos_request(ex.req), ex.resp) else {
                continue;
            };
            let Some(r) = parse_sqos_request(buf) else {
                continue;
            };
            if r.options.0 & 1 != 0 && resp.status() == 0 && !r.logical_flow_id.is_nil() {
                map.insert((ex.req.conn, fid), r.logical_flow_id.to_string());
            }
        }
        map
    }

    fn ios(&self) -> Vec<WireIo> {
        exchanges(&self.msgs)
            .into_iter()
            .filter_map(|ex| {
                let (fid, len) = io_of(ex.req)?;
                let resp = ex.resp?;
                Some(WireIo {
                    key: (ex.req.conn, fid),
                    len,
                    req_first: ex.req.first_frame,
                    req_ts: ex.req.last_ts,
                    resp_frame: resp.last_frame,
                    resp_ts: resp.last_ts,
                })
            })
            .collect()
    }

    /// Every UPDATE_COUNTERS request with the I/O of its interval recomputed from the wire (the
    /// rule: an I/O counts in the first update of its flow whose first frame follows the frame
    /// that completed the I/O's response).
    fn updates(&self) -> Vec<Update> {
        let opens = self.opens();
        let ios = self.ios();
        let mut out = Vec::new();
        let mut prev: HashMap<String, u64> = HashMap::new();
        let exchanges_ok: HashMap<(usize, u64), bool> = self
            .msgs
            .iter()
            .filter(|m| m.is_response())
            .map(|m| ((m.conn, m.message_id()), m.status() == 0))
            .collect();
        let mut reqs: Vec<&Msg> = self.msgs.iter().filter(|m| !m.is_response()).collect();
        reqs.sort_by_key(|m| m.first_frame);
        for m in reqs {
            let Some((fid, buf, _)) = sqos_request(m) else {
                continue;
            };
            let Some(r) = parse_sqos_request(buf) else {
                continue;
            };
            if r.options.0 & 0x10 == 0 {
                continue;
            }
            let Some(flow) = opens.get(&(m.conn, fid)).cloned() else {
                continue;
            };
            // The client zeroed its counters when it sent the update, whatever the answer.
            let from = prev.insert(flow.clone(), m.first_frame).unwrap_or(0);
            // Only updates the server accepted (failed or unanswered ones were lost).
            let accepted = exchanges_ok
                .get(&(m.conn, m.message_id()))
                .copied()
                .unwrap_or(false);
            if !accepted {
                continue;
            }
            let mine = ios.iter().filter(|io| {
                opens.get(&io.key) == Some(&flow)
                    && io.resp_frame > from
                    && io.resp_frame < m.first_frame
            });
            let mut obs = (0, 0, 0, 0);
            for io in mine {
                obs.0 += 1;
                obs.1 += u64::from(io.len).div_ceil(8192);
                obs.2 += (io.resp_ts - io.req_ts) * 10;
                obs.3 += u64::from(io.len) / 1024;
            }
            out.push(Update {
                flow,
                first_frame: m.first_frame,
                last_frame: m.last_frame,
                reported: (
                    r.io_count_increment,
                    r.normalized_io_count_increment,
                    r.lower_latency_increment,
                    r.v1_1.map(|v| v.kilobyte_count_increment),
                ),
                observed: obs,
                latency: r.latency_increment,
            });
        }
        out
    }
}

fn args(s: Scenario) -> SynthConfig {
    SynthConfig::new(s, "memory.pcap")
}

/// Asserts every update's counters equal the recomputed I/O, and the truth file says the same.
fn assert_counters_match(bytes: Vec<u8>, truth: &serde_json::Value) -> usize {
    let updates = Parsed::new(bytes).updates();
    let mut by_frame: BTreeMap<u64, &serde_json::Value> = BTreeMap::new();
    for f in truth["flows"].as_array().unwrap() {
        for u in f["updates"].as_array().unwrap() {
            let answered = u["nt_status"] == 0 && u["response_frame"].is_u64();
            if let (Some(fr), true) = (u["request_frame"].as_u64(), answered) {
                by_frame.insert(fr, u);
            }
        }
    }
    let mut with_io = 0;
    for u in &updates {
        let (io, norm, lower, kb) = u.reported;
        assert_eq!(
            (io, norm, lower),
            (u.observed.0, u.observed.1, u.observed.2),
            "update in frame {} of {}",
            u.first_frame,
            u.flow
        );
        if let Some(kb) = kb {
            assert_eq!(
                kb, u.observed.3,
                "KilobyteCountIncrement in frame {}",
                u.first_frame
            );
        }
        assert!(
            u.latency >= lower,
            "LatencyIncrement below LowerLatencyIncrement in frame {}",
            u.first_frame
        );
        let t = by_frame
            .get(&u.last_frame)
            .unwrap_or_else(|| panic!("truth has no update at frame {}", u.last_frame));
        assert_eq!(t["io_count_increment"].as_u64(), Some(io));
        assert_eq!(t["normalized_io_count_increment"].as_u64(), Some(norm));
        assert_eq!(t["lower_latency_increment"].as_u64(), Some(lower));
        assert_eq!(t["ios"].as_array().unwrap().len() as u64, io);
        with_io += usize::from(io > 0);
    }
    assert_eq!(
        updates.len(),
        by_frame.len(),
        "every update of the truth is on the wire"
    );
    with_io
}

#[test]
fn steady_counters_equal_the_io_on_the_wire() {
    let (bytes, truth) = generate(&args(Scenario::Steady));
    let n = assert_counters_match(bytes, &truth);
    // 4 flows × ~5 intervals in 20 s.
    assert!(n >= 16, "only {n} updates with I/O");
    assert_eq!(truth["flows"].as_array().unwrap().len(), 4);
    let dialects: Vec<&str> = truth["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["dialect"].as_str().unwrap())
        .collect();
    assert!(dialects.contains(&"1.0") && dialects.contains(&"1.1"));
}

#[test]
fn other_scenarios_keep_counters_exact() {
    for s in [
        Scenario::PolicyChange,
        Scenario::NoisyNeighbour,
        Scenario::MisbehavingClient,
        Scenario::InsufficientThroughput,
        Scenario::BandwidthHog,
        Scenario::LiveMigration,
    ] {
        let (bytes, truth) = generate(&args(s));
        assert!(assert_counters_match(bytes, &truth) >= 8, "{s:?}");
    }
    let mut a = args(Scenario::Steady);
    a.ipv6 = true;
    a.vlan = Some(42);
    a.delayed_ack = true;
    a.nanos = true;
    let (bytes, truth) = generate(&a);
    assert!(assert_counters_match(bytes, &truth) >= 16);
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let a = generate(&args(Scenario::PolicyChange)).0;
    let b = generate(&args(Scenario::PolicyChange)).0;
    assert!(a == b, "two runs with seed 1 differ");
    let mut other = args(Scenario::PolicyChange);
    other.seed = 2;
    assert!(generate(&other).0 != a);
}

/// Per flow and update interval: normalized I/O started in the interval, the interval's length
/// in µs, the MaximumIoRate the client had, and the largest single I/O.
fn issued_per_interval(bytes: Vec<u8>) -> Vec<(String, u64, u64, u64, u64)> {
    let p = Parsed::new(bytes);
    let opens = p.opens();
    let ios = p.ios();
    let frames_ts: BTreeMap<u64, u64> = p.msgs.iter().map(|m| (m.last_frame, m.last_ts)).collect();
    let mut rate: HashMap<String, u64> = HashMap::new();
    let mut last: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    let exs = exchanges(&p.msgs);
    let mut sqos: Vec<_> = exs
        .iter()
        .filter(|e| sqos_request(e.req).is_some())
        .collect();
    sqos.sort_by_key(|e| e.req.first_frame);
    for ex in sqos {
        let (fid, buf, _) = sqos_request(ex.req).unwrap();
        let Some(flow) = opens.get(&(ex.req.conn, fid)).cloned() else {
            continue;
        };
        let Some(r) = parse_sqos_request(buf) else {
            continue;
        };
        if r.options.0 & 0x10 != 0 {
            if let (Some(&from), Some(&max_rate)) = (last.get(&flow), rate.get(&flow)) {
                let mine: Vec<&WireIo> = ios
                    .iter()
                    .filter(|io| {
                        opens.get(&io.key) == Some(&flow)
                            && io.req_first > from
                            && io.req_first < ex.req.first_frame
                    })
                    .collect();
                let norm: u64 = mine.iter().map(|io| u64::from(io.len).div_ceil(8192)).sum();
                let biggest = mine
                    .iter()
                    .map(|io| u64::from(io.len).div_ceil(8192))
                    .max()
                    .unwrap_or(0);
                let span =
                    ex.req.last_ts - frames_ts.range(..=from).next_back().map_or(0, |x| *x.1);
                out.push((flow.clone(), norm, span, max_rate, biggest));
            }
            last.insert(flow.clone(), ex.req.first_frame);
        }
        if let Some(resp) = ex.resp {
            if let Some(r) = parse_sqos_response(sqos_output(resp)) {
                rate.insert(flow, r.maximum_io_rate);
            }
        }
    }
    out
}

#[test]
fn steady_clients_stay_under_maximum_io_rate() {
    let rows = issued_per_interval(generate(&args(Scenario::Steady)).0);
    assert!(rows.len() >= 12);
    for (flow, norm, span_us, rate, biggest) in rows {
        // GCRA with 250 ms burst tolerance: at most rate × (T + 0.25 s) plus one I/O.
        let allowed = rate * (span_us + 250_000) / 1_000_000 + biggest;
        assert!(
            rate == 0 || norm <= allowed,
            "{flow}: {norm} normalized I/Os in {span_us} µs at {rate}/s"
        );
    }
}

#[test]
fn noisy_neighbour_exceeds_its_limit_and_others_do_not() {
    let rows = issued_per_interval(generate(&args(Scenario::NoisyNeighbour)).0);
    let over: Vec<_> = rows
        .iter()
        .filter(|(_, norm, span, rate, _)| {
            *rate > 0 && *norm as f64 > 1.5 * *rate as f64 * *span as f64 / 1e6
        })
        .collect();
    // 12 s at TimeToLive ≈ 4 s: every full interval of the noisy VM is over.
    assert!(
        over.len() >= 2,
        "the noisy VM should exceed 1.5× its MaximumIoRate in every interval: {rows:?}"
    );
    let flows: std::collections::BTreeSet<&String> = over.iter().map(|r| &r.0).collect();
    assert_eq!(flows.len(), 1, "only the noisy VM exceeds its limit");
}

#[test]
fn misbehaving_client_gets_the_statuses_the_rules_require() {
    let (bytes, truth) = generate(&args(Scenario::MisbehavingClient));
    let p = Parsed::new(bytes);
    let on_wire: HashMap<u64, u32> = exchanges(&p.msgs)
        .iter()
        .filter(|e| sqos_request(e.req).is_some())
        .filter_map(|e| Some((e.req.last_frame, e.resp?.status())))
        .collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for m in truth["messages"].as_array().unwrap() {
        let purpose = m["purpose"].as_str().unwrap();
        let Some(expected) = purpose
            .split_whitespace()
            .find(|w| w.starts_with("STATUS_"))
        else {
            continue;
        };
        let expected = expected.trim_end_matches(',');
        let code = match expected {
            "STATUS_SUCCESS" => 0,
            "STATUS_NOT_FOUND" => 0xC000_0225,
            "STATUS_INVALID_PARAMETER" => 0xC000_000D,
            "STATUS_REVISION_MISMATCH" => 0xC000_0059,
            other => panic!("unexpected {other}"),
        };
        let frame = m["request_frame"].as_u64().unwrap();
        assert_eq!(
            on_wire.get(&frame),
            Some(&code),
            "{purpose} (frame {frame})"
        );
        *counts.entry(expected).or_default() += 1;
    }
    assert_eq!(counts.get("STATUS_NOT_FOUND"), Some(&3));
    assert_eq!(counts.get("STATUS_INVALID_PARAMETER"), Some(&8));
    assert_eq!(counts.get("STATUS_REVISION_MISMATCH"), Some(&1));
    // The misbehaving host polls at 3× TimeToLive.
    let late = truth["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["poll_factor"] == 3)
        .count();
    assert_eq!(late, 1);
}

#[test]
fn insufficient_throughput_is_reported_and_real() {
    let (bytes, truth) = generate(&args(Scenario::InsufficientThroughput));
    let p = Parsed::new(bytes);
    let statuses: Vec<u32> = p
        .msgs
        .iter()
        .filter(|m| m.is_response() && m.header.command == Command::IOCTL)
        .filter_map(|m| parse_sqos_response(sqos_output(m)))
        .map(|r| r.status.0)
        .collect();
    assert!(statuses.len() >= 20);
    // Flows that set their policy before the total passed the capacity start Ok; from then on
    // every answer is InsufficientThroughput.
    let first_bad = statuses.iter().position(|&s| s == 1).unwrap();
    assert!(first_bad <= 4, "{statuses:?}");
    assert!(
        statuses[first_bad..].iter().all(|&s| s == 1),
        "{statuses:?}"
    );
    // Observed normalized IOPS per flow stays below the 30 reserved.
    let secs = truth["capture"]["duration_s"].as_f64().unwrap();
    for f in truth["flows"].as_array().unwrap() {
        let norm = f["totals"]["normalized_io_count"].as_f64().unwrap();
        assert!(
            norm / secs < 30.0,
            "{} got {} normalized IOPS",
            f["initiator_name"],
            norm / secs
        );
    }
}

#[test]
fn lossy_network_has_retransmissions_reordering_and_gaps() {
    let mut a = args(Scenario::LossyNetwork);
    a.output = "lossy.pcapng".into();
    let (bytes, truth) = generate(&a);
    let c = &truth["capture"];
    assert!(c["retransmissions"].as_u64().unwrap() > 5);
    assert!(c["reordered_segments"].as_u64().unwrap() > 5);
    assert!(c["missing_segments"].as_u64().unwrap() > 0);
    assert_eq!(&bytes[0..4], &[0x0a, 0x0d, 0x0d, 0x0a]);
    let frames = read_capture(bytes);
    assert!(frames
        .iter()
        .all(|f| f.data[12..14] == [0x81, 0x00] && f.data[15] == 100));
}

#[test]
fn midstream_capture_starts_after_the_setup() {
    let mut a = args(Scenario::Steady);
    a.midstream = true;
    let (bytes, truth) = generate(&a);
    let frames = read_capture(bytes);
    let from = (truth["capture"]["capture_from"].as_f64().unwrap() * 1e6).round() as u64;
    assert!(frames[0].ts_us >= from);
    // No SYN in the capture.
    assert!(frames.iter().all(|f| f.data[14 + 20 + 13] & 0x02 == 0));
}

/// `faulty-server` on the wire: the counters still equal the I/O (the failed and the unanswered
/// update lost theirs), the server's answers are the truth's faulty ones, and the clients stay
/// valid SMB2 clients: on each connection the MessageIds run on by each request's credit
/// charge, each is used once, and the request the server never answered is the only one
/// without a response but for the I/O still in flight when the capture ends.
#[test]
fn faulty_server_keeps_the_clients_valid() {
    let (bytes, truth) = generate(&args(Scenario::FaultyServer));
    let end_us = (truth["capture"]["start_time"].as_f64().unwrap()
        + truth["capture"]["duration_s"].as_f64().unwrap())
        * 1e6;
    let parsed = Parsed::new(bytes.clone());
    assert!(assert_counters_match(bytes, &truth) >= 20);
    let mut by_conn: BTreeMap<usize, Vec<&Msg>> = BTreeMap::new();
    for m in parsed.msgs.iter().filter(|m| !m.is_response()) {
        by_conn.entry(m.conn).or_default().push(m);
    }
    let answered: std::collections::HashSet<(usize, u64)> = parsed
        .msgs
        .iter()
        .filter(|m| m.is_response())
        .map(|m| (m.conn, m.message_id()))
        .collect();
    let mut unanswered_sqos = Vec::new();
    for (conn, reqs) in &mut by_conn {
        reqs.sort_by_key(|m| (m.first_frame, m.message_id()));
        for w in reqs.windows(2) {
            let charge = u64::from(w[0].header.credit_charge).max(1);
            assert_eq!(
                w[1].message_id(),
                w[0].message_id() + charge,
                "conn {conn}: frame {}",
                w[1].first_frame
            );
        }
        for m in reqs.iter() {
            if answered.contains(&(*conn, m.message_id())) {
                continue;
            }
            if sqos_request(m).is_some() {
                unanswered_sqos.push((m.first_frame, m.message_id()));
            } else {
                // I/O still in flight at the end of the capture.
                assert!(
                    m.last_ts as f64 > end_us - 500_000.0,
                    "frame {} unanswered",
                    m.first_frame
                );
            }
        }
    }
    let lost: Vec<&serde_json::Value> = truth["faults"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["response_frame"].is_null())
        .collect();
    assert_eq!(lost.len(), 1);
    assert_eq!(
        unanswered_sqos,
        vec![(
            lost[0]["request_frame"].as_u64().unwrap(),
            lost[0]["message_id"].as_u64().unwrap()
        )]
    );
    // The client carried on after it: vm03 kept doing I/O on the same connection.
    let opens = parsed.opens();
    let vm03 = lost[0]["logical_flow_id"].as_str().unwrap();
    let after = parsed
        .ios()
        .iter()
        .filter(|io| {
            opens.get(&io.key).map(String::as_str) == Some(vm03)
                && io.req_first > lost[0]["request_frame"].as_u64().unwrap()
        })
        .count();
    assert!(after >= 20, "{after}");
    // Each fault's response carries the status the truth says the server sent.
    for f in truth["faults"].as_array().unwrap() {
        let Some(frame) = f["response_frame"].as_u64() else {
            continue;
        };
        let resp = parsed
            .msgs
            .iter()
            .find(|m| m.is_response() && m.last_frame == frame)
            .expect("response");
        assert_eq!(Some(u64::from(resp.status())), f["nt_status"].as_u64());
        assert_eq!(resp.message_id(), f["message_id"].as_u64().unwrap());
    }
}

#[test]
fn misreporting_client_reports_only_its_reads() {
    let (bytes, truth) = generate(&args(Scenario::MisreportingClient));
    let updates = Parsed::new(bytes).updates();
    let hv01: Vec<String> = truth["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["host"] == "HV01.contoso.local")
        .map(|f| f["logical_flow_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hv01.len(), 2);
    let mut short = 0;
    for u in &updates {
        let (io, norm, _, _) = u.reported;
        if !hv01.contains(&u.flow) {
            assert_eq!((io, norm), (u.observed.0, u.observed.1), "{}", u.flow);
        } else {
            assert!(io <= u.observed.0, "{} frame {}", u.flow, u.first_frame);
            short += usize::from(io < u.observed.0);
        }
    }
    // HV01's two VMs write half their I/O: nearly every update of theirs falls short.
    assert!(short >= 4, "{short}");
    let hosts = truth["hosts"].as_array().unwrap();
    assert_eq!(hosts[0]["counters"], "reads-only");
    assert_eq!(hosts[1]["counters"], "honest");
    for f in truth["flows"].as_array().unwrap() {
        for u in f["updates"].as_array().unwrap() {
            let ios = u["ios"].as_array().unwrap();
            let reads = ios.iter().filter(|x| x["op"] == "read").count() as u64;
            assert_eq!(u["actual"]["io_count"].as_u64(), Some(ios.len() as u64));
            let want = if f["host"] == "HV01.contoso.local" {
                reads
            } else {
                ios.len() as u64
            };
            assert_eq!(u["io_count_increment"].as_u64(), Some(want));
        }
    }
}
