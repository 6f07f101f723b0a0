//! The user's path, continued (issue 15): `sqos stats`' SMB2 service response times and
//! unanswered requests (against tshark's `-z smb2,srt`), and `sqos dissect -i IFACE` printing
//! each message of a live capture as it completes.

use crate::support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use sqos::capture::{decode_link, CaptureReader};
use sqos::net::decode_tcp;

fn sqos(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(args)
        .current_dir(support::repo())
        .output()
        .expect("run sqos")
}

fn stats_json(path: &Path) -> Value {
    let o = sqos(&["stats", &path.to_string_lossy(), "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("stats JSON")
}

/// (code, calls, min, max, sum) per command, from `sqos stats --format json`.
fn our_srt(path: &Path) -> BTreeMap<u64, (u64, f64, f64, f64)> {
    let v = stats_json(path);
    let mut out = BTreeMap::new();
    for (_, t) in v["srt"].as_object().expect("srt object") {
        let f = |k: &str| t[k].as_f64().expect(k);
        out.insert(
            t["code"].as_u64().expect("code"),
            (
                t["calls"].as_u64().expect("calls"),
                f("min"),
                f("max"),
                f("sum"),
            ),
        );
    }
    out
}

/// What `tshark -q -z smb2,srt` prints for `path`.
fn tshark_srt_text(path: &Path) -> String {
    let o = Command::new("tshark")
        .args(["-q", "-n", "-z", "smb2,srt", "-r"])
        .arg(path)
        .output()
        .expect("run tshark");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The same as [`our_srt`] from tshark's table (index, name, calls, min, max, avg, sum).
fn tshark_srt(text: &str) -> BTreeMap<u64, (u64, f64, f64, f64)> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(code), true) = (w.first().and_then(|c| c.parse().ok()), w.len() >= 7) else {
            continue;
        };
        let n = w.len();
        let num = |i: usize| w[i].parse::<f64>().expect("tshark number");
        let calls: u64 = w[n - 5].parse().expect("calls");
        out.insert(code, (calls, num(n - 4), num(n - 3), num(n - 1)));
    }
    out
}

/// The last five columns (calls, min, max, avg, sum) of each row of a response time table, as
/// printed: tshark's rows begin with their index, ours follow the table's heading.
fn srt_rows(text: &str, ours: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut in_table = !ours;
    for line in text.lines() {
        if ours && line.starts_with("SMB2 service response time") {
            in_table = true;
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        let is_row = if ours {
            in_table && w.len() >= 6 && w[w.len() - 5].parse::<u64>().is_ok()
        } else {
            w.len() >= 7 && w[0].parse::<u64>().is_ok()
        };
        if ours && in_table && line.is_empty() {
            in_table = false;
        }
        if is_row {
            rows.push(w[w.len() - 5..].iter().map(|c| c.to_string()).collect());
        }
    }
    rows
}

#[test]
fn stats_gives_response_times_per_command_and_the_unanswered_requests() {
    // steady: every SQOS request answered; the IOCTLs are exactly the SQOS exchanges.
    let path = support::repo().join("captures/steady.pcap.gz");
    let v = stats_json(&path);
    let ioctl = &v["srt"]["IOCTL"];
    assert_eq!(ioctl["code"], 11);
    assert_eq!(
        ioctl["calls"].as_u64(),
        v["sqos_messages"].as_u64().map(|n| n / 2),
        "{ioctl}"
    );
    let (min, max, avg) = (
        ioctl["min"].as_f64().unwrap(),
        ioctl["max"].as_f64().unwrap(),
        ioctl["avg"].as_f64().unwrap(),
    );
    let (calls, sum) = (
        ioctl["calls"].as_f64().unwrap(),
        ioctl["sum"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= max && max < 1.0, "{ioctl}");
    assert!((avg - sum / calls).abs() < 1e-12, "{ioctl}");
    let reads = &v["srt"]["READ"];
    assert!(reads["calls"].as_u64().unwrap() > 100, "{reads}");
    assert_eq!(v["unanswered_requests"], 0);

    // The text output has the same table.
    let o = sqos(&["stats", "captures/steady.pcap.gz"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("SMB2 service response time"), "{text}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("IOCTL ") && l.split_whitespace().count() == 6)
        .unwrap_or_else(|| panic!("an IOCTL row: {text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], ioctl["calls"].to_string());
    assert_eq!(cells[2], format!("{min:.6}"));

    // A request the capture ends before answering is listed by its command.
    let path = support::repo().join("captures/noisy-neighbour.pcapng.gz");
    let v = stats_json(&path);
    let unanswered = v["unanswered_requests"].as_u64().unwrap();
    let by_command: u64 = v["unanswered_by_command"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(unanswered > 0);
    assert_eq!(by_command, unanswered, "{}", v["unanswered_by_command"]);
    let o = sqos(&["stats", &path.to_string_lossy()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("unanswered        {unanswered}")),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tshark and ../shared/real-captures (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn service_response_times_agree_with_tshark() {
    support::need::tshark();
    let mut compared = 0;
    let mut names = Vec::new();
    for path in support::captures_in(&support::need::real_captures()) {
        let tshark_text = tshark_srt_text(&path);
        let theirs = tshark_srt(&tshark_text);
        if theirs.is_empty() {
            continue;
        }
        let ours = our_srt(&path);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.contains("frames-gap") {
            // A lost server-to-client segment: the messages after it are timed at the frame
            // where reassembly gave the gap up (README, "Where sqos and tshark differ").
            // And decoding resynchronises after it, so a message tshark loses is timed too.
            for (code, (calls, ..)) in &theirs {
                assert!(ours[code].0 >= *calls, "{name}: command {code} calls");
            }
            continue;
        }
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "{name}: the commands timed"
        );
        for (code, (calls, min, max, sum)) in &theirs {
            let (c, mi, ma, su) = ours[code];
            assert_eq!(c, *calls, "{name}: command {code} calls");
            // tshark prints 6 decimals.
            for (what, a, b) in [("min", mi, *min), ("max", ma, *max), ("sum", su, *sum)] {
                assert!(
                    (a - b).abs() <= 1.5e-6,
                    "{name}: command {code} {what}: ours {a}, tshark {b}"
                );
            }
            compared += 1;
        }
        // The text tables agree digit for digit: the same rows in the same order, each time
        // rounded to the microsecond as tshark rounds it.
        // (tshark's text read once, for both.)
        let o = sqos(&["stats", &path.to_string_lossy()]);
        let their_rows = srt_rows(&tshark_text, false);
        assert_eq!(their_rows.len(), theirs.len(), "{name}: tshark's rows");
        assert_eq!(
            srt_rows(&String::from_utf8_lossy(&o.stdout), true),
            their_rows,
            "{name}: the response time tables"
        );
        names.push(name);
    }
    assert!(compared >= 20, "compared {compared} rows in {names:?}");
}

/// The TCP payloads of the first connection of a capture, in order, each with its direction
/// (true: client to server), for replaying the conversation over a real socket.
fn conversation(path: &Path, upto_sqos: usize) -> Vec<(bool, Vec<u8>)> {
    let mut r = CaptureReader::open(path).expect("open");
    let mut client: Option<SocketAddr> = None;
    let mut out = Vec::new();
    let mut ioctls = 0;
    while let Ok(Some(f)) = r.next_frame() {
        let Ok(l3) = decode_link(f.link_type, f.data) else {
            continue;
        };
        let Ok(Some(seg)) = decode_tcp(l3) else {
            continue;
        };
        if seg.payload.is_empty() {
            continue;
        }
        let c = *client.get_or_insert(seg.src);
        let to_server = seg.src == c;
        if !to_server && seg.dst != c {
            continue;
        }
        // SMB2 IOCTL (0x0B) at byte 12 after the 4-byte NetBIOS header.
        if seg.payload.get(16) == Some(&0x0b) && !to_server {
            ioctls += 1;
        }
        out.push((to_server, seg.payload.to_vec()));
        if ioctls >= upto_sqos {
            break;
        }
    }
    out
}

#[test]
#[cfg_attr(
    not(sqos_external_tests),
    ignore = "needs tcpdump and the right to capture on lo (SQOS_EXTERNAL_TESTS=1 runs it)"
)]
fn dissect_live_prints_messages_as_they_complete() {
    support::need::tcpdump();
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().unwrap().port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sqos"))
        .args(["dissect", "-i", "lo", "--port", &port, "-c", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sqos dissect -i");
    // tcpdump's "listening on lo" comes through sqos' stderr: capture has begun.
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let errs = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        panic!("tcpdump never started: {}", errs.join().unwrap());
    }
    // Replay the first SQOS exchanges of a bundled capture over a real connection on lo.
    let script = conversation(&support::repo().join("captures/steady.pcap.gz"), 4);
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
    let (mut server, _) = listener.accept().expect("accept");
    for s in [&client, &server] {
        let mut r = s.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    for (to_server, bytes) in &script {
        let w = if *to_server { &mut client } else { &mut server };
        w.write_all(bytes).expect("send");
        w.flush().unwrap();
    }
    // sqos stops by itself after 4 messages (-c 4), tcpdump with it.
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    let err = errs.join().unwrap();
    assert!(status.success(), "{status}: {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}\n{err}");
    assert!(lines[0].contains("SQOS Request"), "{out}");
    assert!(
        lines.iter().all(|l| l.contains(&format!(":{port}"))),
        "{out}"
    );
    // The same messages as the file gives (frame numbers and times are the replay's own).
    let message = |l: &str| {
        let m = l.split(" SQOS ").nth(1).unwrap_or("");
        m.split(" [").next().unwrap_or("").to_string()
    };
    let file = sqos(&["dissect", "captures/steady.pcap.gz", "-c", "4"]);
    let want: Vec<String> = String::from_utf8_lossy(&file.stdout)
        .lines()
        .map(message)
        .collect();
    let got: Vec<String> = lines.iter().map(|l| message(l)).collect();
    assert_eq!(got, want);
}
