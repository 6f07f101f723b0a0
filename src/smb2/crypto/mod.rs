//! SMB3 decryption: the key file (`keys`), key derivation (`kdf`, `preauth`), the ciphers
//! (`cipher`), and [`Decryptor`], the per-capture state that turns a session id into the keys
//! that can open its messages.
//!
//! Where keys come from, in order: the direction keys of the key file (any dialect, even when
//! the capture starts after the session setup); else the session key, derived for the dialect
//! the capture's NEGOTIATE chose — 3.0/3.0.2 need nothing more, 3.1.1 needs the session's
//! preauth integrity hash, computed here from the NEGOTIATE and SESSION_SETUP messages the
//! framer hands to [`Decryptor::observe`].

pub mod cipher;
pub mod kdf;
pub mod keys;
pub mod preauth;

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;

use crate::budget::{Budget, Kind, MemoryUse, Share};

pub use cipher::{AuthFailed, Cipher, Keyed, Keystream};
pub use keys::{KeyFileError, KeyRing, SessionKeys};

use super::body::parse_negotiate_response;
use super::header::{Header, HEADER_LEN};
use super::names::{Command, NtStatus};
use kdf::{smb30_keys, smb311_keys, DirectionKeys};
use preauth::{preauth_next, PreauthHash, PREAUTH_ZERO};

/// Most connections whose crypto state is kept (under 200 bytes each). The SMB2 layer forgets
/// a connection's state with the connection (`forget_conn`), so the memory budget's connections
/// share bounds them first; this is the backstop. Sessions (only those with keys in the key
/// files) and SESSION_SETUP exchanges in progress are charged to the budget's sessions share.
const MAX_CONNS: usize = 200_000;

/// Ciphers kept keyed ([`KeyedCache`]): the two directions of 32 sessions (a Scale-Out File
/// Server's hosts each have their own, and their messages interleave).
const KEYED_SLOTS: usize = 64;
// A slot's number fits `KeyedCache::direct`'s bytes, with u8::MAX for none.
const _: () = assert!(KEYED_SLOTS < u8::MAX as usize);
/// Most (session, direction) pairs whose candidates are kept ([`Decryptor::candidates`]);
/// past it they are all forgotten and found again as needed.
const MAX_FOUND: usize = 256;

const DIALECT_311: u16 = 0x0311;
/// SMB2_SESSION_FLAG_BINDING in a SESSION_SETUP request's Flags (MS-SMB2 2.2.5).
const SESSION_FLAG_BINDING: u8 = 0x01;

/// How a candidate key was obtained (for saying what was tried when nothing worked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeySource {
    /// A direction key from the key file.
    File,
    /// Derived from the session key as SMB 3.0/3.0.2 does (the capture's NEGOTIATE said so).
    Smb30,
    /// The same, tried because the session's NEGOTIATE is not in the capture.
    Smb30Guess,
    /// Derived from the session key and the preauth hash (SMB 3.1.1).
    Smb311,
}

/// An AES key (16 or 32 bytes) without a heap allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key {
    bytes: [u8; 32],
    len: u8,
}

impl Key {
    pub fn new(b: &[u8]) -> Option<Key> {
        if b.len() != 16 && b.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 32];
        bytes[..b.len()].copy_from_slice(b);
        Some(Key {
            bytes,
            len: b.len() as u8,
        })
    }
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// By its first 16 bytes (as two words: a key's bytes are random, and equal keys hash alike):
/// looked up for every encrypted message ([`KeyedCache`]).
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (a, b) = self.bytes.split_at(8);
        let word = |w: &[u8]| {
            u64::from_le_bytes(
                w.get(..8)
                    .and_then(|w| w.try_into().ok())
                    .unwrap_or_default(),
            )
        };
        state.write_u64(word(a));
        state.write_u64(word(b));
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({} bytes)", self.len)
    }
}

/// A (cipher, key) pair to try on a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub cipher: Cipher,
    pub key: Key,
    pub source: KeySource,
}

/// Up to six candidates, most likely first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Candidates {
    items: [Option<Candidate>; 6],
}

impl Candidates {
    fn push(&mut self, c: Candidate) {
        if self.items.iter().flatten().any(|x| *x == c) {
            return;
        }
        if let Some(slot) = self.items.iter_mut().find(|s| s.is_none()) {
            *slot = Some(c);
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = &Candidate> {
        self.items.iter().flatten()
    }
    pub fn is_empty(&self) -> bool {
        self.items.iter().all(Option::is_none)
    }
    pub fn get(&self, i: usize) -> Option<&Candidate> {
        self.iter().nth(i)
    }
}

/// The ciphers last used, keyed ([`Keyed`]), by (cipher, key): a session's messages reuse its
/// key schedule instead of expanding it each (as costly as decrypting a small message). Fixed
/// size: past `KEYED_SLOTS` keys the least recently used is made again when next needed.
struct KeyedCache {
    /// `KEYED_SLOTS` of them.
    slots: Box<[Option<KeyedSlot>]>,
    /// The slot of each (cipher, key) held: foldhash, seeded per run (keys come from the key
    /// file and the capture's setups).
    index: HashMap<(Cipher, Key), usize, RandomState>,
    /// Looked at first: the slot a (cipher, key) was last found in, by its key's first byte
    /// and the cipher ([`direct_at`]; a key's bytes are random). Every encrypted message asks
    /// for a key, its session's messages interleave with other sessions', and this finds it
    /// without hashing it (a slot reused for another key, or two keys at one place, miss here
    /// and are found in `index`).
    direct: [u8; DIRECT_LEN],
    /// Lookups so far: when each slot was last used.
    tick: u64,
}

const DIRECT_LEN: usize = 256;

/// Where (cipher, key) is in [`KeyedCache::direct`].
fn direct_at(cipher: Cipher, key: &Key) -> usize {
    let cipher = (cipher.id() as u8).wrapping_mul(0x47);
    usize::from(key.bytes[0] ^ cipher)
}

struct KeyedSlot {
    key: Key,
    keyed: Arc<Keyed>,
    used: u64,
}

impl Default for KeyedCache {
    fn default() -> Self {
        KeyedCache {
            slots: std::iter::repeat_with(|| None).take(KEYED_SLOTS).collect(),
            index: HashMap::default(),
            direct: [u8::MAX; DIRECT_LEN],
            tick: 0,
        }
    }
}

impl KeyedCache {
    /// The cipher keyed with `key`; None when the key is not of its length.
    fn get(&mut self, cipher: Cipher, key: &Key) -> Option<&Arc<Keyed>> {
        self.tick += 1;
        let holds = |i: usize| {
            self.slots
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(|s| s.keyed.cipher() == cipher && s.key == *key)
        };
        let at = direct_at(cipher, key);
        let hinted = self.direct.get(at).map_or(usize::MAX, |&i| usize::from(i));
        let hit = if holds(hinted) {
            Some(hinted)
        } else {
            self.index.get(&(cipher, *key)).copied()
        };
        // Else made anew in an empty slot (never used: 0) or the least recently used one.
        let i = match hit {
            Some(i) => i,
            None => {
                let lru = self.slots.iter().enumerate();
                lru.min_by_key(|(_, s)| s.as_ref().map_or(0, |s| s.used))?.0
            }
        };
        let slot = self.slots.get_mut(i)?;
        if hit.is_none() {
            let keyed = Arc::new(Keyed::new(cipher, key.as_slice())?);
            if let Some(old) = slot.take() {
                self.index.remove(&(old.keyed.cipher(), old.key));
            }
            *slot = Some(KeyedSlot {
                key: *key,
                keyed,
                used: 0,
            });
            self.index.insert((cipher, *key), i);
        }
        let s = slot.as_mut()?;
        s.used = self.tick;
        if let (Some(d), Ok(i)) = (self.direct.get_mut(at), u8::try_from(i)) {
            *d = i;
        }
        Some(&s.keyed)
    }
}

impl std::fmt::Debug for KeyedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.slots.iter().flatten().count();
        write!(f, "KeyedCache({held} of {KEYED_SLOTS})")
    }
}

/// Why a session's messages cannot be decrypted at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// No key file, or the session is not in it.
    NoKeys,
    /// An SMB 3.1.1 session with only its session key in the key file, and its SESSION_SETUP
    /// (the preauth hash the keys derive from) is not in the capture.
    NeedDirectionKeys,
}

#[derive(Clone, Debug, Default)]
struct ConnCrypto {
    dialect: Option<u16>,
    cipher: Option<Cipher>,
    /// Preauth hash after the NEGOTIATE request (waiting for the response).
    after_request: Option<PreauthHash>,
    /// The connection's preauth hash (after the NEGOTIATE response), 3.1.1 only.
    hash: Option<PreauthHash>,
}

#[derive(Clone, Debug, Default)]
struct SessionCrypto {
    dialect: Option<u16>,
    cipher: Option<Cipher>,
    preauth: Option<PreauthHash>,
    /// Keys derived so far, per cipher (derivation depends on the cipher's key length).
    derived: Vec<(Cipher, DirectionKeys)>,
}

/// Per-capture decryption state. Bounded: sessions and setups in progress are charged to the
/// memory budget's sessions share (entries plus derived key bytes); past it new ones are not
/// tracked (their messages then need direction keys), and that is counted and reported once.
#[derive(Debug)]
pub struct Decryptor {
    keys: Arc<KeyRing>,
    conns: HashMap<u32, ConnCrypto, RandomState>,
    /// Asked for every encrypted message (`confirm`): foldhash, seeded per run (the keys are
    /// the peers' session ids), not SipHash; so are the other two tables.
    sessions: HashMap<u64, SessionCrypto, RandomState>,
    /// SESSION_SETUP exchanges in progress: (connection, session id) → preauth hash so far.
    setups: HashMap<(u32, u64), PreauthHash, RandomState>,
    share: Share,
    /// The frame being read (for the share's first drop).
    frame: u64,
    /// The candidates found for messages of a session to the server (true) or to the client:
    /// every message of a session asks the same until `observe` or a new cipher's `confirm`
    /// changes what they are (three key lookups and a derivation's look-up a message saved),
    /// and a host's sessions interleave their messages. At most [`MAX_FOUND`].
    found: HashMap<(u64, bool), Candidates, RandomState>,
    /// The last of them to the server and to the client, looked at first (one session's
    /// messages in a row ask for the same).
    recent: [Option<(u64, Candidates)>; 2],
    /// The ciphers of the keys last used, made ready (at most `KEYED_SLOTS` of about 2 KiB:
    /// fixed whatever the capture, so not charged to the share).
    keyed: KeyedCache,
}

impl Default for Decryptor {
    fn default() -> Self {
        Decryptor::new(Arc::default())
    }
}

impl Decryptor {
    /// Within the default budget's sessions share.
    pub fn new(keys: Arc<KeyRing>) -> Decryptor {
        Decryptor::with_share(keys, Budget::default().share(Kind::Sessions))
    }

    pub fn with_share(keys: Arc<KeyRing>, share: Share) -> Decryptor {
        Decryptor {
            keys,
            conns: HashMap::default(),
            sessions: HashMap::default(),
            setups: HashMap::default(),
            share,
            frame: 0,
            found: HashMap::default(),
            recent: [None; 2],
            keyed: KeyedCache::default(),
        }
    }

    /// The frame now being read (what a drop is reported at).
    pub fn at_frame(&mut self, frame: u64) {
        self.frame = frame;
    }

    /// The sessions share: limit, peak, drops.
    /// The sessions share now and its peak since the last call (see `Share::take_peak`).
    pub fn take_peak(&mut self) -> (usize, usize) {
        (self.share.used(), self.share.take_peak())
    }

    pub fn memory(&self) -> MemoryUse {
        self.share.usage()
    }

    /// Room for one more session or setup entry (`bytes` beyond its cost); counted if not.
    fn make_room(&mut self, bytes: usize) -> bool {
        if self.share.fits(1, bytes) {
            self.share.charge(1, bytes);
            true
        } else {
            self.share.dropped(1, bytes as u64, self.frame);
            false
        }
    }

    /// Setups of (conn, sid) insert or replace; a new entry is charged first.
    fn set_setup(&mut self, key: (u32, u64), hash: PreauthHash) {
        if self.setups.contains_key(&key) || self.make_room(0) {
            self.setups.insert(key, hash);
        }
    }

    fn take_setup(&mut self, key: &(u32, u64)) -> Option<PreauthHash> {
        let h = self.setups.remove(key);
        if h.is_some() {
            self.share.release(1, 0);
        }
        h
    }

    /// Sessions in the key file(s).
    pub fn key_sessions(&self) -> usize {
        self.keys.len()
    }

    /// A whole NEGOTIATE or SESSION_SETUP message went by on connection `conn` (`whole` false
    /// when the capture lost part of it: its hash cannot be computed).
    pub fn observe(&mut self, conn: u32, h: &Header, bytes: &[u8], whole: bool) {
        if self.keys.is_empty() {
            return;
        }
        // A NEGOTIATE or SESSION_SETUP may set a session's dialect, cipher or preauth hash.
        self.forget_found();
        let msg = whole.then_some(bytes);
        match (h.command, h.is_response()) {
            (Command::NEGOTIATE, false) => {
                if let Some(c) = self.conn(conn) {
                    *c = ConnCrypto {
                        after_request: msg.map(|m| preauth_next(&PREAUTH_ZERO, m)),
                        ..ConnCrypto::default()
                    };
                }
            }
            (Command::NEGOTIATE, true) => {
                let Ok(n) = parse_negotiate_response(bytes) else {
                    return;
                };
                if let Some(c) = self.conn(conn) {
                    c.dialect = Some(n.dialect);
                    c.cipher = n.cipher_id.and_then(Cipher::from_id);
                    c.hash = match (n.dialect, c.after_request, msg) {
                        (DIALECT_311, Some(prev), Some(m)) => Some(preauth_next(&prev, m)),
                        _ => None,
                    };
                }
            }
            (Command::SESSION_SETUP, false) => {
                let sid = h.session_id;
                let binding = bytes
                    .get(HEADER_LEN + 2)
                    .is_some_and(|f| f & SESSION_FLAG_BINDING != 0);
                let key = (conn, sid);
                if let Some(prev) = self.setups.get(&key).copied() {
                    match msg {
                        Some(m) => self.set_setup(key, preauth_next(&prev, m)),
                        None => {
                            self.take_setup(&key);
                        }
                    }
                } else if sid == 0 && !binding {
                    // A new session: its hash starts from the connection's.
                    let start = self.conns.get(&conn).and_then(|c| c.hash);
                    if let (Some(prev), Some(m)) = (start, msg) {
                        self.set_setup(key, preauth_next(&prev, m));
                    }
                }
            }
            (Command::SESSION_SETUP, true) => {
                let sid = h.session_id;
                let chain = self
                    .take_setup(&(conn, sid))
                    .or_else(|| self.take_setup(&(conn, 0)));
                if h.status == NtStatus::MORE_PROCESSING_REQUIRED {
                    if let (Some(prev), Some(m)) = (chain, msg) {
                        self.set_setup((conn, sid), preauth_next(&prev, m));
                    }
                } else if !h.status.is_error() {
                    let (dialect, cipher) = self
                        .conns
                        .get(&conn)
                        .map(|c| (c.dialect, c.cipher))
                        .unwrap_or_default();
                    let fresh = chain.is_some();
                    let mut freed = 0;
                    if let Some(s) = self.session(sid) {
                        // A binding (second channel) or re-authentication leaves the keys as
                        // they were; only the session's own setup sets the preauth hash.
                        if fresh || s.dialect.is_none() {
                            s.dialect = dialect.or(s.dialect);
                            s.cipher = cipher.or(s.cipher);
                        }
                        if fresh {
                            s.preauth = chain;
                            freed = s.derived.iter().map(|(_, d)| d.key_bytes()).sum();
                            s.derived.clear();
                        }
                    }
                    self.share.release(0, freed);
                }
            }
            _ => {}
        }
    }

    fn conn(&mut self, conn: u32) -> Option<&mut ConnCrypto> {
        if !self.conns.contains_key(&conn) && self.conns.len() >= MAX_CONNS {
            return None;
        }
        Some(self.conns.entry(conn).or_default())
    }

    /// A session's state: only for sessions the key files have keys for (no other can be
    /// opened), within the sessions share.
    fn session(&mut self, sid: u64) -> Option<&mut SessionCrypto> {
        if !self.sessions.contains_key(&sid) && (self.keys.get(sid).is_none() || !self.make_room(0))
        {
            return None;
        }
        Some(self.sessions.entry(sid).or_default())
    }

    /// The connection ended.
    pub fn forget_conn(&mut self, conn: u32) {
        self.conns.remove(&conn);
        if !self.setups.is_empty() {
            let before = self.setups.len();
            self.setups.retain(|(c, _), _| *c != conn);
            self.share.release(before - self.setups.len(), 0);
        }
    }

    /// The message of session `sid` authenticated with `cipher`: later ones try it first.
    pub fn confirm(&mut self, sid: u64, cipher: Cipher) {
        if let Some(s) = self.session(sid) {
            if s.cipher != Some(cipher) {
                s.cipher = Some(cipher);
                self.forget_found();
            }
        }
    }

    /// The candidate's cipher keyed; None when its key is not of the cipher's length.
    pub fn keyed(&mut self, c: &Candidate) -> Option<&Arc<Keyed>> {
        self.keyed.get(c.cipher, &c.key)
    }

    /// The (cipher, key) pairs that may open a message of session `sid` travelling to the
    /// server (`to_server`) or to the client.
    pub fn candidates(&mut self, sid: u64, to_server: bool) -> Result<Candidates, Missing> {
        let recent = &mut self.recent[usize::from(!to_server)];
        if let Some((s, c)) = *recent {
            if s == sid {
                return Ok(c);
            }
        }
        if let Some(c) = self.found.get(&(sid, to_server)) {
            *recent = Some((sid, *c));
            return Ok(*c);
        }
        let found = self.find_candidates(sid, to_server);
        if let Ok(c) = found {
            if self.found.len() >= MAX_FOUND {
                self.found.clear();
            }
            self.found.insert((sid, to_server), c);
            self.recent[usize::from(!to_server)] = Some((sid, c));
        }
        found
    }

    /// What `observe` or `confirm` may change: the candidates found.
    fn forget_found(&mut self) {
        self.found.clear();
        self.recent = [None; 2];
    }

    /// [`Decryptor::candidates`], looked up.
    fn find_candidates(&mut self, sid: u64, to_server: bool) -> Result<Candidates, Missing> {
        let keys = Arc::clone(&self.keys);
        let Some(k) = keys.get(sid) else {
            return Err(Missing::NoKeys);
        };
        let (dialect, known) = self
            .sessions
            .get(&sid)
            .map(|s| (s.dialect, s.cipher))
            .unwrap_or_default();
        let mut out = Candidates::default();
        let dir_key = if to_server {
            &k.client_to_server
        } else {
            &k.server_to_client
        };
        if let Some(key) = Key::new(dir_key) {
            let fitting = Cipher::for_key_len(dir_key.len());
            if let Some(c) = known.filter(|c| fitting.contains(c)) {
                out.push(Candidate {
                    cipher: c,
                    key,
                    source: KeySource::File,
                });
            }
            for &c in fitting {
                out.push(Candidate {
                    cipher: c,
                    key,
                    source: KeySource::File,
                });
            }
        }
        if !k.session_key.is_empty() {
            match dialect {
                Some(DIALECT_311) => {
                    let one;
                    let ciphers: &[Cipher] = match known {
                        Some(c) => {
                            one = [c];
                            &one
                        }
                        None => &Cipher::ALL,
                    };
                    for &c in ciphers {
                        if let Some(d) = self.derived_311(sid, &k.session_key, c) {
                            let b = if to_server {
                                &d.client_to_server
                            } else {
                                &d.server_to_client
                            };
                            if let Some(key) = Key::new(b) {
                                out.push(Candidate {
                                    cipher: c,
                                    key,
                                    source: KeySource::Smb311,
                                });
                            }
                        }
                    }
                    if out.is_empty() {
                        return Err(Missing::NeedDirectionKeys);
                    }
                }
                Some(d) if d < 0x0300 => {}
                // 3.0/3.0.2, or a session whose NEGOTIATE is not in the capture: 3.0's
                // derivation needs nothing else, so it is worth a try.
                dialect => {
                    let d = smb30_keys(&k.session_key);
                    let b = if to_server {
                        d.client_to_server
                    } else {
                        d.server_to_client
                    };
                    if let Some(key) = Key::new(&b) {
                        out.push(Candidate {
                            cipher: Cipher::Aes128Ccm,
                            key,
                            source: if dialect.is_some() {
                                KeySource::Smb30
                            } else {
                                KeySource::Smb30Guess
                            },
                        });
                    }
                }
            }
        }
        if out.is_empty() {
            return Err(Missing::NoKeys);
        }
        Ok(out)
    }

    fn derived_311(&mut self, sid: u64, session_key: &[u8], c: Cipher) -> Option<DirectionKeys> {
        let s = self.sessions.get_mut(&sid)?;
        if let Some((_, d)) = s.derived.iter().find(|(x, _)| *x == c) {
            return Some(d.clone());
        }
        let d = smb311_keys(session_key, &s.preauth?, c);
        // Derived keys are kept (charged to the share) unless it is full: then derived anew.
        let bytes = d.key_bytes();
        if self.share.fits(0, bytes) {
            self.share.charge(0, bytes);
            s.derived.push((c, d.clone()));
        }
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smb2::header::parse_header;
    use crate::synth::smb2::{message, session_setup_response, Header as Synth, SESSION_SETUP};
    use crate::synth::wire::Part;

    /// A successful SESSION_SETUP response of session `sid`, without its NetBIOS header.
    fn setup_response(sid: u64) -> Vec<u8> {
        let h = Synth {
            command: SESSION_SETUP,
            response: true,
            session_id: sid,
            ..Synth::default()
        };
        let mut out = Vec::new();
        for p in message(&h, &session_setup_response(), 0) {
            if let Part::Bytes(b) = p {
                out.extend_from_slice(&b);
            }
        }
        out.split_off(4)
    }

    #[test]
    fn candidates_are_asked_again_once_a_setup_or_a_new_cipher_changes_them() {
        let mut ring = KeyRing::default();
        ring.insert(SessionKeys {
            session_id: 5,
            session_key: vec![7; 16],
            server_to_client: Vec::new(),
            client_to_server: Vec::new(),
        });
        let mut d = Decryptor::new(Arc::new(ring));
        let first = |d: &mut Decryptor, to_server| {
            let c = d.candidates(5, to_server).expect("candidates");
            c.get(0).map(|c| (c.cipher, c.source))
        };
        // No NEGOTIATE seen: SMB 3.0's derivation is guessed.
        assert_eq!(
            first(&mut d, true),
            Some((Cipher::Aes128Ccm, KeySource::Smb30Guess))
        );
        assert!(d.found.contains_key(&(5, true)));
        // A confirmed cipher the session did not have forgets what was found; the same one
        // again keeps it.
        d.confirm(5, Cipher::Aes128Ccm);
        assert!(d.found.is_empty());
        assert!(first(&mut d, true).is_some());
        d.confirm(5, Cipher::Aes128Ccm);
        assert!(d.found.contains_key(&(5, true)));
        d.sessions.get_mut(&5).expect("session").dialect = Some(DIALECT_311);
        assert_eq!(
            first(&mut d, true),
            Some((Cipher::Aes128Ccm, KeySource::Smb30Guess)),
            "found before the dialect changed"
        );
        d.confirm(5, Cipher::Aes256Gcm);
        assert!(d.found.is_empty());
        // SMB 3.1.1 without a preauth hash: only direction keys would open it.
        assert_eq!(d.candidates(5, false), Err(Missing::NeedDirectionKeys));
        // A SESSION_SETUP of the session forgets what was found for either direction.
        d.sessions.get_mut(&5).expect("session").dialect = None;
        assert!(first(&mut d, false).is_some());
        let bytes = setup_response(5);
        let h = parse_header(&bytes).expect("header");
        d.observe(1, &h, &bytes, true);
        assert!(d.found.is_empty());
    }

    /// Session `sid`'s direction key: different for every session and direction.
    fn dir_key(sid: u64, to_server: bool) -> Vec<u8> {
        (0..16u8)
            .map(|i| i ^ (sid as u8) ^ u8::from(to_server) << 7)
            .collect()
    }

    /// Two keys at one place of the direct table (the same first byte) each find their own
    /// keyed cipher, in turn, and a slot reused for another key is not taken for the old one.
    #[test]
    fn keys_at_one_direct_place_find_their_own_cipher() {
        let mut cache = KeyedCache::default();
        let a = Key::new(&[0x11; 16]).expect("key");
        let mut b_bytes = [0x22; 16];
        b_bytes[0] = 0x11;
        let b = Key::new(&b_bytes).expect("key");
        assert_eq!(
            direct_at(Cipher::Aes128Gcm, &a),
            direct_at(Cipher::Aes128Gcm, &b)
        );
        let ka = Arc::clone(cache.get(Cipher::Aes128Gcm, &a).expect("a"));
        let kb = Arc::clone(cache.get(Cipher::Aes128Gcm, &b).expect("b"));
        assert!(!Arc::ptr_eq(&ka, &kb));
        for _ in 0..3 {
            assert!(Arc::ptr_eq(
                &ka,
                cache.get(Cipher::Aes128Gcm, &a).expect("a")
            ));
            assert!(Arc::ptr_eq(
                &kb,
                cache.get(Cipher::Aes128Gcm, &b).expect("b")
            ));
        }
        // The same key under the other cipher is another keyed cipher.
        let ccm = cache.get(Cipher::Aes128Ccm, &a).expect("ccm");
        assert_eq!(ccm.cipher(), Cipher::Aes128Ccm);
        assert_eq!(cache.index.len(), 3);
        // Every slot taken by other keys: `a`'s slot is reused, and `a` is made anew, not
        // read from the direct table's stale place.
        for n in 0..KEYED_SLOTS as u8 {
            cache.get(Cipher::Aes256Gcm, &Key::new(&[n; 32]).expect("key"));
        }
        let again = cache.get(Cipher::Aes128Gcm, &a).expect("a");
        assert!(!Arc::ptr_eq(&ka, again));
        assert_eq!(again.cipher(), Cipher::Aes128Gcm);
    }

    #[test]
    fn keyed_ciphers_are_kept_by_cipher_and_key_and_stay_few() {
        let mut ring = KeyRing::default();
        // More sessions than the slots keep.
        let sessions = KEYED_SLOTS as u64 + 4;
        for sid in 1..=sessions {
            ring.insert(SessionKeys {
                session_id: sid,
                session_key: Vec::new(),
                server_to_client: dir_key(sid, false),
                client_to_server: dir_key(sid, true),
            });
        }
        let mut d = Decryptor::new(Arc::new(ring));
        let first = |d: &mut Decryptor, sid, to_server| {
            *d.candidates(sid, to_server)
                .expect("candidates")
                .get(0)
                .expect("one")
        };
        // A message of `sid` sealed with its key opens with the cipher kept for it.
        let opens = |d: &mut Decryptor, sid: u64, to_server: bool, n: u8| {
            let c = first(d, sid, to_server);
            let plain = vec![n; 100];
            let mut buf = plain.clone();
            let key = dir_key(sid, to_server);
            let th = cipher::seal(c.cipher, &key, [n; 16], sid, &mut buf).expect("seal");
            let keyed = d.keyed(&c).expect("keyed");
            assert_eq!(keyed.cipher(), c.cipher);
            keyed.open(&th, &mut buf).is_ok() && buf == plain
        };
        // Two sessions, both directions, interleaved: each message its own key.
        for n in 0..4 {
            for (sid, to_server) in [(1, true), (2, true), (1, false), (2, false)] {
                assert!(opens(&mut d, sid, to_server, n), "{sid} {to_server} {n}");
            }
        }
        // The same cipher and key: the same keyed cipher, made once; the same key with the
        // other cipher (GCM first, then CCM): another.
        let c = first(&mut d, 1, true);
        let kept = Arc::clone(d.keyed(&c).expect("keyed"));
        assert!(Arc::ptr_eq(&kept, d.keyed(&c).expect("keyed")));
        let ccm = *d
            .candidates(1, true)
            .expect("candidates")
            .get(1)
            .expect("two");
        assert_eq!(
            (c.cipher, ccm.cipher),
            (Cipher::Aes128Gcm, Cipher::Aes128Ccm)
        );
        assert_eq!(d.keyed(&ccm).expect("keyed").cipher(), Cipher::Aes128Ccm);
        // All the sessions: no more than the slots are kept (and found by the index), and the
        // oldest, made anew, opens.
        for sid in 1..=sessions {
            assert!(opens(&mut d, sid, true, 9), "{sid}");
        }
        assert_eq!(d.keyed.slots.iter().flatten().count(), KEYED_SLOTS);
        assert_eq!(d.keyed.index.len(), KEYED_SLOTS);
        for (i, s) in d.keyed.slots.iter().enumerate() {
            let s = s.as_ref().expect("held");
            assert_eq!(d.keyed.index.get(&(s.keyed.cipher(), s.key)), Some(&i));
        }
        assert!(opens(&mut d, 1, true, 10));
        assert!(!Arc::ptr_eq(&kept, d.keyed(&c).expect("keyed")));
        // A key of the wrong length makes no cipher (and takes no slot).
        let wrong_len = Candidate {
            key: Key::new(&[1; 32]).expect("key"),
            ..c
        };
        assert!(d.keyed(&wrong_len).is_none());
        assert!(d
            .keyed
            .slots
            .iter()
            .flatten()
            .all(|s| s.key.as_slice().len() == 16));
    }

    #[test]
    fn sessions_stay_within_their_share_and_drops_are_counted() {
        let mut ring = KeyRing::default();
        for sid in 1..=100u64 {
            ring.insert(SessionKeys {
                session_id: sid,
                session_key: vec![7; 16],
                server_to_client: Vec::new(),
                client_to_server: Vec::new(),
            });
        }
        // Room for ten entries.
        let share = Share::new(Kind::Sessions, 10 * Kind::Sessions.entry_cost());
        let mut d = Decryptor::with_share(Arc::new(ring), share);
        d.at_frame(42);
        // Sessions 1..=100 have keys; 1000.. have none and are not kept at all.
        for sid in (1..=100u64).chain(1000..1100) {
            let bytes = setup_response(sid);
            let h = parse_header(&bytes).expect("header");
            d.observe(1, &h, &bytes, true);
        }
        assert_eq!(d.sessions.len(), 10);
        let m = d.memory();
        assert_eq!(m.dropped, 90, "{m:?}");
        assert_eq!(m.first_drop_frame, Some(42));
        assert!(m.peak_bytes <= m.limit_bytes, "{m:?}");
    }
}
