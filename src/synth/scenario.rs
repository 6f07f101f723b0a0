//! The named scenarios: which hosts, VMs, disks, policies, demands and scripted events a
//! simulated cluster has. Everything random is drawn from the seed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use uuid::Uuid;

use super::rng::Rng;
use super::server::{ServerFault, ServerPolicy};
use super::smb2::{STATUS_INVALID_PARAMETER, STATUS_NOT_FOUND};
use super::wire::Time;
use crate::sqos::{Dialect, Options, ProtocolVersion, Request};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    Steady,
    NoisyNeighbour,
    PolicyChange,
    MisbehavingClient,
    InsufficientThroughput,
    LossyNetwork,
    FaultyServer,
    Large,
    SpecExamples,
    BandwidthHog,
    MisreportingClient,
    LiveMigration,
    Multichannel,
    HostileNames,
}

impl Scenario {
    /// Every scenario by its name (`--scenario`), with a word of help where the name is not
    /// enough.
    pub const NAMES: &'static super::Names<Scenario> = &[
        ("steady", Scenario::Steady, ""),
        ("noisy-neighbour", Scenario::NoisyNeighbour, ""),
        ("policy-change", Scenario::PolicyChange, ""),
        ("misbehaving-client", Scenario::MisbehavingClient, ""),
        (
            "insufficient-throughput",
            Scenario::InsufficientThroughput,
            "",
        ),
        ("lossy-network", Scenario::LossyNetwork, ""),
        ("faulty-server", Scenario::FaultyServer, ""),
        ("large", Scenario::Large, ""),
        ("spec-examples", Scenario::SpecExamples, ""),
        ("bandwidth-hog", Scenario::BandwidthHog, ""),
        ("misreporting-client", Scenario::MisreportingClient, ""),
        ("live-migration", Scenario::LiveMigration, ""),
        ("multichannel", Scenario::Multichannel, ""),
        (
            "hostile-names",
            Scenario::HostileNames,
            "Initiator, node and file names made to fool a terminal, a spreadsheet and an XML \
             reader (docs/robustness.md): every face must show them escaped",
        ),
    ];

    pub fn name(self) -> &'static str {
        super::name_of(Scenario::NAMES, self)
    }

    /// The scenario named `name`.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::NAMES.iter().find(|e| e.0 == name).map(|e| e.1)
    }
}

/// What a flow asks the server for (SET_POLICY).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PolicySpec {
    pub policy_id: Uuid,
    pub limit: u64,
    pub reservation: u64,
    pub bandwidth_limit: u64,
}

/// How the client sets a flow up after CREATE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupStyle {
    /// SET_LOGICAL_FLOW_ID, then SET_POLICY|GET_STATUS (the spec's section 4.2 order).
    Separate,
    /// SET_LOGICAL_FLOW_ID|SET_POLICY|GET_STATUS in one request.
    Combined,
    /// SET_LOGICAL_FLOW_ID, SET_POLICY, then GET_STATUS|UPDATE_COUNTERS within 1 s (3.1.6).
    StatusLater,
}

/// The I/O a VM disk does.
#[derive(Clone, Debug)]
pub struct Demand {
    /// Mean I/O arrival rate from the VM, per second.
    pub iops: f64,
    pub read_percent: u32,
    /// (size in bytes, weight).
    pub sizes: Vec<(u32, u32)>,
    /// Most I/Os the client keeps outstanding on the flow.
    pub queue_depth: u32,
}

#[derive(Clone, Debug)]
pub struct FlowSpec {
    pub vm: String,
    pub initiator_id: Uuid,
    pub path: String,
    pub flow_id: Uuid,
    pub policy: PolicySpec,
    pub demand: Demand,
    pub setup: SetupStyle,
    pub disk_bytes: u64,
    /// Opened when the host connects; otherwise only by an `Action::Handoff` naming it.
    pub opened_at_start: bool,
}

/// A further channel of a host's session: a pair of NICs, one on the host, one on the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicPair {
    pub client_ip: IpAddr,
    pub client_mac: [u8; 6],
    pub server_ip: IpAddr,
    pub server_mac: [u8; 6],
}

/// How a channel fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropKind {
    /// The server resets the connection (a RST the client sees at once).
    Rst,
    /// The link fails: nothing more is seen on the connection, no FIN, no RST; the client
    /// notices a second later.
    Silence,
}

#[derive(Clone, Debug)]
pub struct HostSpec {
    pub name: String,
    pub ip: IpAddr,
    pub mac: [u8; 6],
    /// SMB3 multichannel: further channels of the host's session, each over its own pair of
    /// NICs, bound after the session is set up on the first (`ip` → the server's address).
    pub extra_channels: Vec<NicPair>,
    pub smb_dialect: u16,
    pub sqos: Dialect,
    pub interface: u32,
    /// Throttles to the server's MaximumIoRate / MaximumBandwidth (section 3.1.7.1).
    pub obeys_limits: bool,
    /// Also throttles to MaximumBandwidth (1.1); a client whose throttle predates dialect 1.1
    /// paces MaximumIoRate only.
    pub throttles_bandwidth: bool,
    /// What its UPDATE_COUNTERS report.
    pub counters: CounterReporting,
    /// Status requests are sent this many TimeToLives after the last answer (1 = on time).
    pub poll_factor: u32,
    pub flows: Vec<FlowSpec>,
}

/// What a host's client puts in UPDATE_COUNTERS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CounterReporting {
    /// Every completed I/O (section 3.1.4.1).
    #[default]
    Honest,
    /// Only completed READs: a client bug that leaves every WRITE out of all five increments.
    ReadsOnly,
}

/// A raw request a misbehaving client sends on its spare (never associated) open or on a flow's.
#[derive(Clone, Debug)]
pub struct RawRequest {
    pub request: Request,
    pub max_output: u32,
    /// On a flow's open (index in the cluster's flow list) instead of the spare open.
    pub on_flow: Option<usize>,
    pub note: &'static str,
}

#[derive(Clone, Debug)]
pub enum Action {
    /// The host changes a flow's policy (SET_POLICY|GET_STATUS).
    ClientPolicy { flow: usize, policy: PolicySpec },
    /// The administrator changes a policy on the server.
    ServerPolicy { id: Uuid, policy: ServerPolicy },
    /// The VM's disk is closed and opened again (same logical flow).
    Reopen { flow: usize },
    /// A request on the host's spare open or a flow's open.
    Raw { host: usize, raw: Box<RawRequest> },
    /// The disk of flow `from` leaves its host: I/O drains, a last GET_STATUS|UPDATE_COUNTERS
    /// reports its counters, CLOSE; `after_us` later flow `to` (same LogicalFlowID, on its own
    /// host) opens the disk and sets the flow up (a live migration, or a copied VM started).
    Handoff {
        from: usize,
        to: usize,
        after_us: u64,
    },
    /// The server's bug `Cluster::faults[i]` strikes the next request it matches.
    ArmFault(usize),
    /// Channel `channel` (index among the host's channels, 1 or more) of `host` fails: what
    /// was outstanding on it is sent again on the others.
    DropChannel {
        host: usize,
        channel: usize,
        how: DropKind,
    },
}

/// The open whose next SQOS request an armed server fault strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOn {
    /// The open of a flow (index in the cluster's flow list).
    Flow(usize),
    /// The spare open of a host.
    Spare(usize),
}

/// A server bug injected at a scripted time (`faulty-server`).
#[derive(Clone, Debug)]
pub struct FaultSpec {
    pub fault: ServerFault,
    pub on: FaultOn,
    /// The request must include these Options flags.
    pub when: Options,
    /// The flow the fault concerns (index in the cluster's flow list): the open's, or the one
    /// a spare-open request names.
    pub flow: usize,
    /// The `sqos flows` finding it should give.
    pub finding: &'static str,
    /// What the server did wrong.
    pub what: &'static str,
}

#[derive(Clone, Debug)]
pub struct Cluster {
    pub start: Time,
    pub duration_us: u64,
    pub server_ip: IpAddr,
    pub server_mac: [u8; 6],
    pub server_name: String,
    pub share: String,
    /// Normalized IOPS the storage serves (beyond it I/Os queue on the server).
    pub storage_iops: u64,
    /// Normalized IOPS of reservations the server can guarantee.
    pub reservable_iops: u64,
    pub base_ttl_ms: u32,
    pub policies: Vec<(Uuid, ServerPolicy)>,
    pub hosts: Vec<HostSpec>,
    pub script: Vec<(u64, Action)>,
    /// Hosts get a spare open for raw requests.
    pub spare_open: bool,
    /// Server bugs, armed by `Action::ArmFault`.
    pub faults: Vec<FaultSpec>,
}

impl Cluster {
    /// `\\server\share`: the path the hosts' TREE_CONNECT asks for.
    pub fn share_path(&self) -> String {
        format!("\\\\{}\\{}", self.server_name, self.share)
    }

    /// The full path of a file of the share, as an analyzer that saw the TREE_CONNECT names it.
    pub fn unc(&self, path: &str) -> String {
        format!("{}\\{path}", self.share_path())
    }

    pub fn flows(&self) -> impl Iterator<Item = (usize, &FlowSpec)> {
        self.hosts
            .iter()
            .enumerate()
            .flat_map(|(h, host)| host.flows.iter().map(move |f| (h, f)))
    }
}

/// Knobs from the command line that shape the cluster.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub hosts: Option<u32>,
    pub vms: Option<u32>,
    pub disks: Option<u32>,
    pub duration_s: Option<f64>,
    pub ipv6: bool,
    pub interfaces: u32,
    pub sizes_up_to_1mib: bool,
    /// Channels per host (multichannel); default 1, `multichannel` 4, 2, 3, 4, 2, 3, …
    pub channels: Option<u32>,
}

/// 2026-11-20 09:00:00 UTC: the capture's clock starts here.
pub const EPOCH_US: Time = 1_795_165_200_000_000;

const SMALL_SIZES: &[(u32, u32)] = &[(4096, 55), (8192, 25), (16384, 10), (32768, 5), (65536, 5)];
const ALL_SIZES: &[(u32, u32)] = &[
    (4096, 35),
    (8192, 20),
    (16384, 10),
    (32768, 10),
    (65536, 15),
    (262_144, 7),
    (1_048_576, 3),
];

/// The address of host `host`'s NIC `nic` (0: the one its first channel uses), on network
/// `nic`.
pub fn nic_ip(host: u32, nic: u32, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(
            0xfd00,
            0x5105,
            nic as u16,
            0,
            0,
            0,
            0,
            0x11 + host as u16,
        ))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 0, nic as u8, 11 + host as u8))
    }
}

/// The MAC address of host `host`'s NIC `nic`.
pub fn nic_mac(host: u32, nic: u32) -> [u8; 6] {
    [0x00, 0x15, 0x5d, 0x0a, nic as u8, 0x11 + host as u8]
}

/// The server's MAC address on network `nic`.
pub fn server_nic_mac(nic: u32) -> [u8; 6] {
    [0x00, 0x15, 0x5d, 0x0a, nic as u8, 0x64]
}

/// The server's address on network `nic`.
pub fn server_nic_ip(nic: u32, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0x5105, nic as u16, 0, 0, 0, 0, 0x100))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 0, nic as u8, 100))
    }
}

pub fn build(scenario: Scenario, shape: &Shape, rng: &mut Rng) -> Cluster {
    let (def_hosts, def_vms, def_secs) = match scenario {
        Scenario::InsufficientThroughput => (2, 3, 12.0),
        Scenario::MisbehavingClient => (2, 2, 18.0),
        Scenario::NoisyNeighbour => (2, 2, 12.0),
        Scenario::FaultyServer => (2, 4, 15.0),
        Scenario::BandwidthHog => (2, 2, 10.0),
        Scenario::MisreportingClient => (2, 2, 12.0),
        Scenario::LiveMigration => (2, 2, 16.0),
        Scenario::HostileNames => (2, 2, 6.0),
        _ => (2, 2, 20.0),
    };
    let n_hosts = shape.hosts.unwrap_or(def_hosts).max(1);
    let n_vms = shape.vms.unwrap_or(def_vms).max(1);
    let n_disks = shape.disks.unwrap_or(1).max(1);
    let duration_us = (shape.duration_s.unwrap_or(def_secs).max(1.0) * 1e6) as u64;
    let sizes = if shape.sizes_up_to_1mib {
        ALL_SIZES
    } else {
        SMALL_SIZES
    };
    let gold = Uuid::from_u128(0x6f2e_1a3c_9b47_4d1e_8a55_c0ff_ee00_0001);
    let silver = Uuid::from_u128(0x6f2e_1a3c_9b47_4d1e_8a55_c0ff_ee00_0002);
    let mut policies = vec![
        (
            gold,
            ServerPolicy {
                minimum_io_rate: 40,
                maximum_io_rate: 200,
                maximum_bandwidth: 0,
            },
        ),
        (
            silver,
            ServerPolicy {
                minimum_io_rate: 20,
                maximum_io_rate: 100,
                maximum_bandwidth: 1024,
            },
        ),
    ];
    let mut hosts = Vec::new();
    let mut vm_no = 1u32;
    // Hosts alternate 1.1 and 1.0, except where the scenario needs 1.1 everywhere (bandwidth
    // limits; a migration between hosts of the same release).
    let all_v11 = matches!(scenario, Scenario::BandwidthHog | Scenario::LiveMigration);
    for h in 0..n_hosts {
        let v11 = all_v11 || h % 2 == 0;
        let mut flows = Vec::new();
        for _ in 0..n_vms {
            let vm = format!("vm{vm_no:02}");
            let initiator_id = rng.uuid();
            for d in 0..n_disks {
                let k = flows.len() as u32 + h;
                let policy = match k % 3 {
                    0 => PolicySpec {
                        limit: 120,
                        reservation: 30,
                        bandwidth_limit: if v11 { 2048 } else { 0 },
                        ..PolicySpec::default()
                    },
                    1 => PolicySpec {
                        policy_id: if k % 2 == 0 { gold } else { silver },
                        ..PolicySpec::default()
                    },
                    _ => PolicySpec {
                        limit: 80,
                        reservation: 0,
                        ..PolicySpec::default()
                    },
                };
                let setup = match rng.below(3) {
                    0 => SetupStyle::Separate,
                    1 => SetupStyle::Combined,
                    _ => SetupStyle::StatusLater,
                };
                flows.push(FlowSpec {
                    vm: vm.clone(),
                    initiator_id,
                    path: format!("{vm}\\disk{d}.vhdx"),
                    flow_id: rng.uuid(),
                    policy,
                    demand: Demand {
                        iops: 8.0 + rng.below(7) as f64,
                        read_percent: 55 + rng.below(30) as u32,
                        sizes: sizes.to_vec(),
                        queue_depth: 8,
                    },
                    setup,
                    disk_bytes: (40 + rng.below(88)) << 30,
                    opened_at_start: true,
                });
            }
            vm_no += 1;
        }
        let channels = shape.channels.unwrap_or(match scenario {
            Scenario::Multichannel => [4, 2, 3][h as usize % 3],
            _ => 1,
        });
        let extra_channels = (1..channels.clamp(1, 4))
            .map(|n| NicPair {
                client_ip: nic_ip(h, n, shape.ipv6),
                client_mac: nic_mac(h, n),
                server_ip: server_nic_ip(n, shape.ipv6),
                server_mac: server_nic_mac(n),
            })
            .collect();
        hosts.push(HostSpec {
            name: format!("HV{:02}.contoso.local", h + 1),
            ip: nic_ip(h, 0, shape.ipv6),
            mac: nic_mac(h, 0),
            extra_channels,
            smb_dialect: if v11 { 0x0311 } else { 0x0302 },
            sqos: if v11 { Dialect::V1_1 } else { Dialect::V1_0 },
            interface: h % shape.interfaces.max(1),
            obeys_limits: true,
            throttles_bandwidth: true,
            counters: CounterReporting::Honest,
            poll_factor: 1,
            flows,
        });
    }
    let mut c = Cluster {
        start: EPOCH_US,
        duration_us,
        server_ip: server_nic_ip(0, shape.ipv6),
        server_mac: server_nic_mac(0),
        server_name: "sofs".into(),
        share: "vms".into(),
        storage_iops: 20_000,
        reservable_iops: 10_000,
        base_ttl_ms: 4000,
        policies: Vec::new(),
        hosts,
        script: Vec::new(),
        spare_open: false,
        faults: Vec::new(),
    };
    let at = |frac: f64| (duration_us as f64 * frac) as u64;
    match scenario {
        Scenario::Steady | Scenario::LossyNetwork | Scenario::Large | Scenario::SpecExamples => {}
        Scenario::Multichannel => {
            // The first host's third channel is reset by the server at 40 %; at 60 % the last
            // channel of the second host goes silent (its link failed). I/O outstanding on
            // them is sent again on the others.
            let drops = [
                (0usize, 2usize, DropKind::Rst, 0.4),
                (1, 1, DropKind::Silence, 0.6),
            ];
            for (host, channel, how, when) in drops {
                let n = c.hosts.get(host).map_or(0, |h| h.extra_channels.len());
                // The last channel when the host has fewer; never the first.
                let channel = channel.min(n);
                if channel >= 1 {
                    c.script
                        .push((at(when), Action::DropChannel { host, channel, how }));
                }
            }
        }
        Scenario::FaultyServer => faulty_server(&mut c),
        Scenario::HostileNames => hostile_names(&mut c),
        Scenario::NoisyNeighbour => {
            // The first VM wants three times its limit and its host does not throttle it; the
            // shared storage is small, so everyone's latency grows.
            c.storage_iops = 170;
            if let Some(host) = c.hosts.first_mut() {
                host.obeys_limits = false;
                for f in host.flows.iter_mut().take(1) {
                    f.policy = PolicySpec {
                        limit: 25,
                        reservation: 10,
                        bandwidth_limit: 0,
                        ..PolicySpec::default()
                    };
                    f.demand.iops = 50.0;
                    f.demand.queue_depth = 32;
                }
                // The host's other VMs stay under their limits.
                for f in host.flows.iter_mut().skip(1) {
                    f.demand.iops = f.demand.iops.min(12.0);
                }
            }
        }
        Scenario::PolicyChange => {
            c.script.push((
                at(0.35),
                Action::ClientPolicy {
                    flow: 0,
                    policy: PolicySpec {
                        limit: 15,
                        reservation: 5,
                        bandwidth_limit: 0,
                        ..PolicySpec::default()
                    },
                },
            ));
            c.script.push((
                at(0.55),
                Action::ServerPolicy {
                    id: silver,
                    policy: ServerPolicy {
                        minimum_io_rate: 10,
                        maximum_io_rate: 12,
                        maximum_bandwidth: 256,
                    },
                },
            ));
            c.script.push((
                at(0.55),
                Action::ServerPolicy {
                    id: gold,
                    policy: ServerPolicy {
                        minimum_io_rate: 10,
                        maximum_io_rate: 12,
                        maximum_bandwidth: 0,
                    },
                },
            ));
            let last = c.flows().count().saturating_sub(1);
            c.script.push((at(0.7), Action::Reopen { flow: last }));
        }
        Scenario::BandwidthHog => {
            // vm01 streams 256 KiB–1 MiB reads at ~450 KB/s against MaximumBandwidth 256 KB/s;
            // HV01's throttle paces MaximumIoRate only (400 normalized IOPS, far above its ~55),
            // so vm01 exceeds its bandwidth and nothing else. The other VMs do 4–16 KiB I/O.
            for f in c.hosts.iter_mut().flat_map(|h| h.flows.iter_mut()) {
                f.demand.sizes = vec![(4096, 60), (8192, 30), (16384, 10)];
            }
            if let Some(host) = c.hosts.first_mut() {
                host.throttles_bandwidth = false;
                if let Some(f) = host.flows.first_mut() {
                    f.policy = PolicySpec {
                        limit: 400,
                        reservation: 0,
                        bandwidth_limit: 256,
                        ..PolicySpec::default()
                    };
                    f.demand = Demand {
                        iops: 1.4,
                        read_percent: 80,
                        sizes: vec![(262_144, 70), (524_288, 25), (1_048_576, 5)],
                        queue_depth: 4,
                    };
                }
            }
            // vm03 wants 160 KB/s of 16 KiB I/O and HV02 paces it to its 128 KB/s.
            if let Some(f) = c.hosts.get_mut(1).and_then(|h| h.flows.first_mut()) {
                f.policy = PolicySpec {
                    limit: 200,
                    reservation: 0,
                    bandwidth_limit: 128,
                    ..PolicySpec::default()
                };
                f.demand.iops = 10.0;
                f.demand.sizes = vec![(16384, 1)];
            }
        }
        Scenario::MisreportingClient => {
            // HV01's client leaves WRITEs out of its counters; its VMs write half their I/O.
            if let Some(host) = c.hosts.first_mut() {
                host.counters = CounterReporting::ReadsOnly;
                for f in host.flows.iter_mut() {
                    f.demand.read_percent = 50;
                }
            }
        }
        Scenario::LiveMigration => {
            let last_host = c.hosts.len() - 1;
            // vm01 (first VM of HV01) moves to the last host: the same VM (InitiatorID) and
            // logical flow, another InitiatorNodeName.
            let migrated = c.hosts.first().and_then(|h| h.flows.first()).cloned();
            // The last host's last VM is shut down and replaced by a copy of its configuration
            // under a new VM id (InitiatorID): the copy keeps the disk's LogicalFlowID.
            let original = c.hosts.last().and_then(|h| h.flows.last()).cloned();
            let mut pushed = Vec::new();
            if let Some(f) = migrated {
                let from = c.flows().position(|(_, x)| x.path == f.path);
                pushed.push((from, f.path.clone(), at(0.35), 30_000));
                let f = FlowSpec {
                    opened_at_start: false,
                    ..f
                };
                c.hosts[last_host].flows.push(f);
            }
            if let Some(f) = original {
                let from = c.flows().position(|(_, x)| x.path == f.path);
                let vm = format!("vm{vm_no:02}");
                let copy = FlowSpec {
                    vm: vm.clone(),
                    initiator_id: rng.uuid(),
                    path: format!("{vm}\\disk0.vhdx"),
                    opened_at_start: false,
                    ..f
                };
                pushed.push((from, copy.path.clone(), at(0.5), 1_500_000));
                c.hosts[last_host].flows.push(copy);
            }
            for (from, path, when, after_us) in pushed {
                // The new flow's index: the last one on `last_host` with that path.
                let to = c
                    .flows()
                    .enumerate()
                    .filter(|(_, (h, x))| *h == last_host && x.path == path && !x.opened_at_start)
                    .map(|(i, _)| i)
                    .last();
                if let (Some(from), Some(to)) = (from, to) {
                    c.script
                        .push((when, Action::Handoff { from, to, after_us }));
                }
            }
        }
        Scenario::MisbehavingClient => {
            c.spare_open = true;
            let bad = c.hosts.len().saturating_sub(1);
            if let Some(host) = c.hosts.get_mut(bad) {
                host.obeys_limits = false;
                host.poll_factor = 3;
                for f in host.flows.iter_mut() {
                    f.policy = PolicySpec {
                        limit: 10,
                        ..PolicySpec::default()
                    };
                    f.demand.iops = 18.0;
                }
            }
            let dialect = c.hosts.get(bad).map_or(Dialect::V1_0, |h| h.sqos);
            let first_bad_flow = c.flows().position(|(h, _)| h == bad);
            for (i, raw) in misbehaving_requests(dialect, first_bad_flow, rng)
                .into_iter()
                .enumerate()
            {
                c.script.push((
                    at(0.15) + i as u64 * 700_000,
                    Action::Raw {
                        host: bad,
                        raw: Box::new(raw),
                    },
                ));
            }
        }
        Scenario::InsufficientThroughput => {
            // Every flow reserves 30 normalized IOPS; the server can guarantee 100 in total
            // and its storage serves about 110.
            c.reservable_iops = 100;
            c.storage_iops = 110;
            for host in c.hosts.iter_mut() {
                for f in host.flows.iter_mut() {
                    f.policy = PolicySpec {
                        limit: 100,
                        reservation: 30,
                        bandwidth_limit: 0,
                        ..PolicySpec::default()
                    };
                    f.demand.iops = 45.0;
                    f.demand.queue_depth = 4;
                    f.demand.sizes = vec![(4096, 60), (8192, 30), (16384, 10)];
                }
            }
        }
    }
    policies.sort_by_key(|p| p.0);
    c.policies = policies;
    // Stable: an ArmFault stays before the request it is armed for.
    c.script.sort_by_key(|s| s.0);
    c
}

/// `faulty-server`: a cluster whose file server has bugs in its Storage QoS implementation,
/// one per flow (the last VM of each host stays clean), each striking one request.
/// The names of `hostile-names`, one per flow in order (hosts first to last).
pub const HOSTILE_NAMES: [&str; 4] = [
    // Sets the terminal's title, then clears the screen.
    "vm01\u{1b}]0;pwned\u{7}\u{1b}[2J",
    // Forges an output line of `sqos dissect`.
    "vm02\r\n     99   0.000000 10.6.6.6:445 → 10.0.0.1:1 SQOS Response FORGED",
    // Shows as "vm03exe.vhdx" reversed: a right-to-left override.
    "vm03\u{202e}xdhv.exe",
    // A spreadsheet formula, and markup for XML faces.
    "=HYPERLINK(\"http://evil.example/\",\"vm04\")<b>&amp;",
];
/// The second host's name: colours the terminal red.
pub const HOSTILE_NODE: &str = "HV02\u{1b}[31m.contoso.local";

fn hostile_names(c: &mut Cluster) {
    let mut names = HOSTILE_NAMES.iter().cycle();
    for (i, h) in c.hosts.iter_mut().enumerate() {
        if i == 1 {
            h.name = HOSTILE_NODE.into();
        }
        for f in &mut h.flows {
            let name = names.next().copied().unwrap_or("vm");
            f.vm = name.into();
            f.path = format!("{name}\\disk0.vhdx");
        }
    }
}

fn faulty_server(c: &mut Cluster) {
    let at = |secs: f64| (secs * 1e6) as u64;
    // Half the usual demand keeps the capture small.
    for host in c.hosts.iter_mut() {
        for f in host.flows.iter_mut() {
            f.demand.iops /= 2.0;
        }
    }
    c.spare_open = true;
    let index = |c: &Cluster, host: usize, vm: usize| {
        c.flows()
            .enumerate()
            .filter(|(_, (h, _))| *h == host)
            .nth(vm)
            .map(|(i, _)| i)
    };
    let (Some(vm01), Some(vm02), Some(vm03)) = (index(c, 0, 0), index(c, 0, 1), index(c, 0, 2))
    else {
        return;
    };
    let (Some(vm05), Some(vm06), Some(vm07), Some(vm08)) = (
        index(c, 1, 0),
        index(c, 1, 1),
        index(c, 1, 2),
        index(c, 1, 3),
    ) else {
        return;
    };
    let flow = |i: usize| c.flows().nth(i).map(|(h, f)| (h, f.clone()));
    let (Some((_, f02)), Some((h07, f07)), Some((_, f08)), Some((_, f01))) =
        (flow(vm02), flow(vm07), flow(vm08), flow(vm01))
    else {
        return;
    };
    let dialect = |c: &Cluster, h: usize| c.hosts.get(h).map_or(Dialect::V1_0, |x| x.sqos);
    let node07 = c.hosts.get(h07).map(|h| h.name.clone()).unwrap_or_default();
    let arm = |c: &mut Cluster, t: u64, spec: FaultSpec| {
        c.script.push((t, Action::ArmFault(c.faults.len())));
        c.faults.push(spec);
    };

    // vm06: its first status request (GET_STATUS|UPDATE_COUNTERS on its associated open) is
    // failed with STATUS_NOT_FOUND; the client retries 10 s later (note <4>).
    arm(
        c,
        0,
        FaultSpec {
            fault: ServerFault::FailsWith(STATUS_NOT_FOUND),
            on: FaultOn::Flow(vm06),
            when: Options::UPDATE_COUNTERS,
            flow: vm06,
            finding: "flow.server_wrongly_failed",
            what: "STATUS_NOT_FOUND to a valid GET_STATUS|UPDATE_COUNTERS on an associated open",
        },
    );
    // vm02: a management agent on HV01 asks vm02's status on a handle of its own it never
    // associated; the server looks the flow up by the request's LogicalFlowID and answers.
    arm(
        c,
        at(2.5),
        FaultSpec {
            fault: ServerFault::IgnoresAssociation,
            on: FaultOn::Spare(0),
            when: Options::GET_STATUS,
            flow: vm02,
            finding: "flow.server_should_have_failed",
            what: "STATUS_SUCCESS (vm02's status) to GET_STATUS on an open never associated; section 3.2.5.1.4 requires STATUS_NOT_FOUND",
        },
    );
    let mut r = Request::new(dialect(c, 0));
    r.options = Options::GET_STATUS;
    r.logical_flow_id = f02.flow_id;
    r.initiator_id = f02.initiator_id;
    c.script.push((
        at(2.5),
        Action::Raw {
            host: 0,
            raw: Box::new(raw(
                r,
                None,
                "agent asks vm02's status on its own, never associated open: STATUS_NOT_FOUND required",
            )),
        },
    ));
    // vm07: the agent on HV02 re-applies vm07's policy on its unassociated handle; the server
    // checks parameters before the association and answers STATUS_INVALID_PARAMETER.
    arm(
        c,
        at(3.0),
        FaultSpec {
            fault: ServerFault::WrongStatus(STATUS_INVALID_PARAMETER),
            on: FaultOn::Spare(h07),
            when: Options::SET_POLICY,
            flow: vm07,
            finding: "flow.server_wrong_error",
            what: "STATUS_INVALID_PARAMETER to SET_POLICY on an open never associated; section 3.2.5.1.2 requires STATUS_NOT_FOUND",
        },
    );
    let mut r = Request::new(dialect(c, h07)).with_names(&f07.vm, &node07);
    r.options = Options::SET_POLICY | Options::GET_STATUS;
    r.logical_flow_id = f07.flow_id;
    r.initiator_id = f07.initiator_id;
    r.policy_id = f07.policy.policy_id;
    r.limit = f07.policy.limit;
    r.reservation = f07.policy.reservation;
    if let Some(v) = r.v1_1.as_mut() {
        v.bandwidth_limit = f07.policy.bandwidth_limit;
    }
    c.script.push((
        at(3.0),
        Action::Raw {
            host: h07,
            raw: Box::new(raw(
                r,
                None,
                "agent re-applies vm07's policy on its own, never associated open: STATUS_NOT_FOUND required",
            )),
        },
    ));
    // vm05: its next status answer is read from vm08's entry.
    arm(
        c,
        at(3.5),
        FaultSpec {
            fault: ServerFault::AnswersForFlow(f08.flow_id),
            on: FaultOn::Flow(vm05),
            when: Options::GET_STATUS,
            flow: vm05,
            finding: "flow.server_state_mismatch",
            what: "GET_STATUS answered with vm08's LogicalFlowID, PolicyID, InitiatorID and rates",
        },
    );
    // vm01: the administrator sets a reservation above the limit; the server skips the
    // checks of note <8> and accepts it.
    let bad = PolicySpec {
        limit: 100,
        reservation: 150,
        bandwidth_limit: f01.policy.bandwidth_limit,
        ..PolicySpec::default()
    };
    arm(
        c,
        at(4.0),
        FaultSpec {
            fault: ServerFault::SkipsPolicyChecks,
            on: FaultOn::Flow(vm01),
            when: Options::SET_POLICY,
            flow: vm01,
            finding: "flow.server_should_have_failed",
            what: "STATUS_SUCCESS to SET_POLICY with Reservation 150 > Limit 100; Windows fails it with STATUS_INVALID_PARAMETER (note <8>)",
        },
    );
    c.script.push((
        at(4.0),
        Action::ClientPolicy {
            flow: vm01,
            policy: bad,
        },
    ));
    // vm03: its next status request is lost in the server and never answered; the client
    // keeps doing I/O (its status request stays outstanding).
    arm(
        c,
        at(5.5),
        FaultSpec {
            fault: ServerFault::NoResponse,
            on: FaultOn::Flow(vm03),
            when: Options::UPDATE_COUNTERS,
            flow: vm03,
            finding: "flow.request_unanswered",
            what: "GET_STATUS|UPDATE_COUNTERS never answered",
        },
    );
}

/// The misbehaving client's deliberate protocol errors, in order, each with the status the
/// server must answer.
fn misbehaving_requests(dialect: Dialect, flow: Option<usize>, rng: &mut Rng) -> Vec<RawRequest> {
    let fresh = rng.uuid();
    let mut out = Vec::new();
    let mut r = Request::new(dialect).with_names("vm99", "HV99.contoso.local");
    r.options = Options::SET_POLICY | Options::GET_STATUS;
    r.logical_flow_id = fresh;
    r.limit = 100;
    out.push(raw(
        r,
        None,
        "SET_POLICY on an open never associated: STATUS_NOT_FOUND",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::GET_STATUS | Options::UPDATE_COUNTERS;
    r.logical_flow_id = fresh;
    r.io_count_increment = 12;
    r.normalized_io_count_increment = 12;
    out.push(raw(
        r,
        None,
        "UPDATE_COUNTERS on an unassociated open: STATUS_NOT_FOUND",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::PROBE_POLICY | Options::GET_STATUS;
    out.push(raw(
        r,
        None,
        "PROBE_POLICY with a null LogicalFlowID: STATUS_INVALID_PARAMETER",
    ));
    let mut r = Request::new(dialect);
    r.protocol_version = ProtocolVersion(0x0200);
    r.options = Options::SET_LOGICAL_FLOW_ID;
    r.logical_flow_id = fresh;
    out.push(raw(
        r,
        None,
        "unknown ProtocolVersion 0x0200: STATUS_REVISION_MISMATCH",
    ));
    let mut r = Request::new(dialect);
    r.options = Options(0x20);
    r.logical_flow_id = fresh;
    out.push(raw(
        r,
        None,
        "no known Options flag: STATUS_INVALID_PARAMETER",
    ));
    // Associate the spare open, then break rules that need an association.
    let mut r = Request::new(dialect);
    r.options = Options::SET_LOGICAL_FLOW_ID;
    r.logical_flow_id = fresh;
    out.push(raw(r, None, "associates the spare open: STATUS_SUCCESS"));
    // The name "lies" inside the fixed part (no name bytes follow it).
    let mut r = Request::new(dialect);
    r.options = Options::SET_POLICY;
    r.logical_flow_id = fresh;
    r.initiator_name_offset = 40;
    r.initiator_name_length = 8;
    out.push(raw(
        r,
        None,
        "InitiatorNameOffset 40 (< 104): STATUS_INVALID_PARAMETER",
    ));
    // A node name of 400 bytes announced right after the name, but the request ends there.
    let mut r = Request::new(dialect).with_names("vm99", "");
    r.options = Options::SET_POLICY;
    r.logical_flow_id = fresh;
    r.initiator_node_name_offset = r.initiator_name_offset + r.initiator_name_length;
    r.initiator_node_name_length = 400;
    out.push(raw(
        r,
        None,
        "InitiatorNodeName runs past the request: STATUS_INVALID_PARAMETER",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::SET_POLICY;
    r.logical_flow_id = fresh;
    r.limit = 50;
    r.reservation = 80;
    out.push(raw(
        r,
        None,
        "Reservation above Limit (note <8>): STATUS_INVALID_PARAMETER",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::SET_POLICY;
    r.logical_flow_id = fresh;
    r.policy_id = rng.uuid();
    r.limit = 50;
    out.push(raw(
        r,
        None,
        "Limit together with a PolicyID (note <8>): STATUS_INVALID_PARAMETER",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::SET_POLICY;
    r.logical_flow_id = fresh;
    r.limit = 2_000_000_000;
    out.push(raw(
        r,
        None,
        "Limit above 10^9 (note <8>): STATUS_INVALID_PARAMETER",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::GET_STATUS;
    r.logical_flow_id = fresh;
    let mut x = raw(
        r,
        None,
        "GET_STATUS with MaxOutputResponse 64 (< 80): STATUS_INVALID_PARAMETER",
    );
    x.max_output = 64;
    out.push(x);
    let mut r = Request::new(dialect).with_names("vm99", "HV99.contoso.local");
    r.options = Options::SET_POLICY;
    r.logical_flow_id = fresh;
    r.limit = 40;
    out.push(raw(
        r,
        None,
        "SET_POLICY without GET_STATUS and no status request within 1 s: STATUS_SUCCESS",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::SET_LOGICAL_FLOW_ID;
    out.push(raw(
        r,
        None,
        "null LogicalFlowID: dissociates the spare open, STATUS_SUCCESS",
    ));
    let mut r = Request::new(dialect);
    r.options = Options::GET_STATUS | Options::UPDATE_COUNTERS;
    r.logical_flow_id = fresh;
    r.io_count_increment = 3;
    r.normalized_io_count_increment = 3;
    out.push(raw(
        r,
        None,
        "UPDATE_COUNTERS after dissociation: STATUS_NOT_FOUND",
    ));
    if let Some(f) = flow {
        let mut r = Request::new(dialect);
        r.options = Options::PROBE_POLICY | Options::GET_STATUS;
        r.logical_flow_id = rng.uuid();
        let mut x = raw(
            r,
            Some(f),
            "PROBE_POLICY on an associated open: ignored, status of the open's own flow",
        );
        x.on_flow = Some(f);
        out.push(x);
    }
    out
}

fn raw(request: Request, on_flow: Option<usize>, note: &'static str) -> RawRequest {
    RawRequest {
        request,
        max_output: 4096,
        on_flow,
        note,
    }
}
