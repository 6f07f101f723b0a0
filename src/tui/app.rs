//! What the user is looking at and how keys and the mouse change it. No drawing here.

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};
use uuid::Uuid;

use super::lists::{finding_rows, flow_rows, message_indices, FlowCol, Sort};
use super::live::Live;
use super::theme::Theme;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Flows,
    Detail,
    Messages,
    Findings,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DetailTab {
    Iops,
    Bandwidth,
    Latency,
    Opens,
    Channels,
    Timeline,
    Findings,
}

impl DetailTab {
    pub const ALL: [DetailTab; 7] = [
        DetailTab::Iops,
        DetailTab::Bandwidth,
        DetailTab::Latency,
        DetailTab::Opens,
        DetailTab::Channels,
        DetailTab::Timeline,
        DetailTab::Findings,
    ];
    pub fn title(self) -> &'static str {
        match self {
            DetailTab::Iops => "IOPS",
            DetailTab::Bandwidth => "KB/s",
            DetailTab::Latency => "Latency",
            DetailTab::Opens => "Opens",
            DetailTab::Channels => "Channels",
            DetailTab::Timeline => "Status",
            DetailTab::Findings => "Findings",
        }
    }
    fn step(self, d: isize) -> DetailTab {
        let n = DetailTab::ALL.len() as isize;
        let i = DetailTab::ALL.iter().position(|t| *t == self).unwrap_or(0) as isize;
        DetailTab::ALL
            .get((i + d).rem_euclid(n) as usize)
            .copied()
            .unwrap_or(self)
    }
}

/// The pane of the Messages view that has the keyboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    List,
    Tree,
}

/// A selection in a list and the first row shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pub sel: usize,
    pub offset: usize,
}

impl Cursor {
    /// Keep the selection inside `len` and on screen in `height` rows; the rows to draw.
    pub fn visible(&mut self, len: usize, height: usize) -> std::ops::Range<usize> {
        self.sel = self.sel.min(len.saturating_sub(1));
        let h = height.max(1);
        if self.sel < self.offset {
            self.offset = self.sel;
        } else if self.sel >= self.offset + h {
            self.offset = self.sel + 1 - h;
        }
        self.offset = self.offset.min(len.saturating_sub(h));
        self.offset..(self.offset + h).min(len)
    }

    pub fn step(&mut self, delta: isize, len: usize) {
        let max = len.saturating_sub(1) as isize;
        self.sel = (self.sel as isize + delta).clamp(0, max.max(0)) as usize;
    }
}

/// A clickable place on the screen, recorded while drawing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    View(View),
    FlowHeader(FlowCol),
    FlowRow(usize),
    DetailTab(DetailTab),
    DetailRow(usize),
    MsgRow(usize),
    TreeRow(usize),
    FindingRow(usize),
}

pub struct App {
    pub view: View,
    back: Vec<View>,
    pub theme: Theme,
    pub help: bool,
    pub quit: bool,
    /// Typing goes into the current view's filter.
    pub editing: bool,
    pub flows_filter: String,
    pub msgs_filter: String,
    pub findings_filter: String,
    pub sort: Sort,
    pub flows: Cursor,
    pub detail_flow: Option<Uuid>,
    pub detail_tab: DetailTab,
    pub detail_list: Cursor,
    /// Messages restricted to one flow.
    pub msg_scope: Option<Uuid>,
    pub msgs: Cursor,
    /// The selected message as `dropped + index` in the store: stays put as old ones drop.
    pub msg_seq: Option<u64>,
    pub pane: Pane,
    pub tree: Cursor,
    pub findings: Cursor,
    /// A one-off message for the key bar (cleared by the next key).
    pub flash: Option<String>,
    pub hits: Vec<(Rect, Hit)>,
    /// Rows a page key moves (set from the last drawn list height).
    pub page: usize,
    /// The Flows columns that fit on the screen at the last draw (`s` cycles through them).
    pub flow_cols: Vec<FlowCol>,
}

impl App {
    pub fn new(theme: Theme) -> Self {
        App {
            view: View::Flows,
            back: Vec::new(),
            theme,
            help: false,
            quit: false,
            editing: false,
            flows_filter: String::new(),
            msgs_filter: String::new(),
            findings_filter: String::new(),
            sort: Sort::default(),
            flows: Cursor::default(),
            detail_flow: None,
            detail_tab: DetailTab::Iops,
            detail_list: Cursor::default(),
            msg_scope: None,
            msgs: Cursor::default(),
            msg_seq: None,
            pane: Pane::List,
            tree: Cursor::default(),
            findings: Cursor::default(),
            flash: None,
            hits: Vec::new(),
            page: 10,
            flow_cols: FlowCol::ALL.to_vec(),
        }
    }

    fn go(&mut self, v: View) {
        if self.view != v {
            self.back.push(self.view);
            if self.back.len() > 32 {
                self.back.remove(0);
            }
            self.view = v;
        }
        self.editing = false;
    }

    fn go_back(&mut self) {
        self.view = self.back.pop().unwrap_or(View::Flows);
    }

    pub fn filter_mut(&mut self) -> Option<&mut String> {
        match self.view {
            View::Flows => Some(&mut self.flows_filter),
            View::Messages => Some(&mut self.msgs_filter),
            View::Findings => Some(&mut self.findings_filter),
            View::Detail => None,
        }
    }

    /// The store index of the selected message among `shown`, fixing the cursor to it.
    pub fn sync_msg_cursor(&mut self, live: &Live, shown: &[usize]) {
        let dropped = live.tap.store.dropped();
        if let Some(seq) = self.msg_seq {
            let target = seq.checked_sub(dropped).map(|i| i as usize);
            if let Some(pos) = target.and_then(|t| shown.iter().position(|&i| i == t)) {
                self.msgs.sel = pos;
                return;
            }
        }
        self.msgs.sel = self.msgs.sel.min(shown.len().saturating_sub(1));
        self.msg_seq = shown.get(self.msgs.sel).map(|&i| dropped + i as u64);
    }

    fn set_msg_sel(&mut self, live: &Live, shown: &[usize], pos: usize) {
        self.msgs.sel = pos.min(shown.len().saturating_sub(1));
        let new = shown
            .get(self.msgs.sel)
            .map(|&i| live.tap.store.dropped() + i as u64);
        if new != self.msg_seq {
            self.tree = Cursor::default();
        }
        self.msg_seq = new;
    }

    /// Show the message completed in `frame` in the Messages view.
    pub fn jump_to_frame(&mut self, live: &Live, frame: u64) {
        match live.tap.store.index_of_frame(frame) {
            Some(i) => {
                self.msg_scope = None;
                self.msgs_filter.clear();
                self.msg_seq = Some(live.tap.store.dropped() + i as u64);
                self.msgs.sel = i;
                self.tree = Cursor::default();
                self.pane = Pane::List;
                self.go(View::Messages);
            }
            None => {
                self.flash = Some(format!(
                    "frame {frame}: message not kept (only the last {} are)",
                    live.tap.store.cap()
                ))
            }
        }
    }

    fn open_detail(&mut self, id: Uuid) {
        self.detail_flow = Some(id);
        self.detail_tab = DetailTab::Iops;
        self.detail_list = Cursor::default();
        self.go(View::Detail);
    }

    fn scope_messages(&mut self, id: Uuid) {
        self.msg_scope = Some(id);
        self.msgs_filter.clear();
        self.msgs = Cursor::default();
        self.msg_seq = None;
        self.pane = Pane::List;
        self.go(View::Messages);
    }

    fn tree_len(live: &Live, app: &App) -> usize {
        let Some(i) = app
            .msg_seq
            .and_then(|s| s.checked_sub(live.tap.store.dropped()))
            .map(|i| i as usize)
        else {
            return 0;
        };
        live.tap.store.full(i).map_or(0, |r| r.body.fields().len())
    }

    fn detail_len(&self, live: &Live) -> usize {
        let Some(d) = self.detail_flow.and_then(|id| live.analysis.detail(id)) else {
            return 0;
        };
        match self.detail_tab {
            DetailTab::Opens => d.opens.len(),
            DetailTab::Channels => d.channels.len(),
            DetailTab::Timeline => d.timeline.len(),
            DetailTab::Findings => d.findings.len(),
            _ => 0,
        }
    }

    /// Move the selection of the list that has the keyboard.
    fn move_sel(&mut self, live: &Live, delta: isize) {
        match self.view {
            View::Flows => {
                let n = flow_rows(live, self.sort, &self.flows_filter).len();
                self.flows.step(delta, n);
            }
            View::Detail => {
                let n = self.detail_len(live);
                self.detail_list.step(delta, n);
            }
            View::Messages => match self.pane {
                Pane::List => {
                    let shown = message_indices(live, self.msg_scope, &self.msgs_filter);
                    self.sync_msg_cursor(live, &shown);
                    let mut c = self.msgs;
                    c.step(delta, shown.len());
                    self.set_msg_sel(live, &shown, c.sel);
                }
                Pane::Tree => {
                    let n = Self::tree_len(live, self);
                    self.tree.step(delta, n);
                }
            },
            View::Findings => {
                let n = finding_rows(live, &self.findings_filter).len();
                self.findings.step(delta, n);
            }
        }
    }

    fn enter(&mut self, live: &Live) {
        match self.view {
            View::Flows => {
                let rows = flow_rows(live, self.sort, &self.flows_filter);
                if let Some(r) = rows.get(self.flows.sel) {
                    self.open_detail(r.id);
                }
            }
            View::Detail => {
                let Some(d) = self.detail_flow.and_then(|id| live.analysis.detail(id)) else {
                    return;
                };
                let i = self.detail_list.sel;
                let frame = match self.detail_tab {
                    DetailTab::Opens => d.opens.get(i).map(|o| o.frame),
                    DetailTab::Channels => d.channels.get(i).map(|c| c.first_frame),
                    DetailTab::Timeline => d.timeline.get(i).map(|o| o.frame),
                    DetailTab::Findings => d.findings.get(i).map(|o| o.frame),
                    _ => None,
                };
                match frame {
                    Some(f) => self.jump_to_frame(live, f),
                    None => self.scope_messages(d.id),
                }
            }
            View::Messages => {
                self.pane = match self.pane {
                    Pane::List => Pane::Tree,
                    Pane::Tree => Pane::List,
                }
            }
            View::Findings => {
                let rows = finding_rows(live, &self.findings_filter);
                if let Some(f) = rows.get(self.findings.sel) {
                    let frame = f.frame;
                    self.jump_to_frame(live, frame);
                }
            }
        }
    }

    fn partner(&mut self, live: &Live) {
        let shown = message_indices(live, self.msg_scope, &self.msgs_filter);
        self.sync_msg_cursor(live, &shown);
        let Some(i) = self
            .msg_seq
            .and_then(|s| s.checked_sub(live.tap.store.dropped()))
            .map(|i| i as usize)
        else {
            return;
        };
        match live.tap.store.partner(i) {
            Some(j) => {
                if !shown.contains(&j) {
                    self.msgs_filter.clear();
                    self.msg_scope = None;
                }
                self.msg_seq = Some(live.tap.store.dropped() + j as u64);
                self.tree = Cursor::default();
            }
            None => self.flash = Some("the other half of this exchange is not in the list".into()),
        }
    }

    fn cycle_sort(&mut self) {
        self.sort.col = match self.sort.col {
            None => self.flow_cols.first().copied(),
            Some(c) => c.next_in(&self.flow_cols),
        };
        self.sort.reverse = false;
    }

    pub fn sort_by(&mut self, col: FlowCol) {
        if self.sort.col == Some(col) {
            self.sort.reverse = !self.sort.reverse;
        } else {
            self.sort = Sort {
                col: Some(col),
                reverse: false,
            };
        }
    }

    pub fn on_key(&mut self, key: KeyEvent, live: &Live) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        self.flash = None;
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c')) {
            self.quit = true;
            return;
        }
        if self.help {
            self.help = false;
            return;
        }
        if self.editing {
            self.edit_filter(key);
            return;
        }
        if self.view == View::Messages {
            // The selection as the screen shows it (also before the first draw).
            let shown = message_indices(live, self.msg_scope, &self.msgs_filter);
            self.sync_msg_cursor(live, &shown);
        }
        let page = self.page.max(1) as isize;
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') | KeyCode::F(1) => self.help = true,
            KeyCode::Char('/') => {
                if self.view == View::Detail {
                    self.go(View::Flows);
                }
                self.editing = true;
            }
            KeyCode::Char('1') => self.go(View::Flows),
            KeyCode::Char('2') => self.go(View::Messages),
            KeyCode::Char('3') => self.go(View::Findings),
            KeyCode::Tab => self.go(match self.view {
                View::Flows => View::Messages,
                View::Detail | View::Messages => View::Findings,
                View::Findings => View::Flows,
            }),
            KeyCode::BackTab => self.go(match self.view {
                View::Flows => View::Findings,
                View::Detail | View::Messages => View::Flows,
                View::Findings => View::Messages,
            }),
            KeyCode::Esc => {
                let cleared = match self.filter_mut() {
                    Some(f) if !f.is_empty() => {
                        f.clear();
                        true
                    }
                    _ => false,
                };
                if !cleared {
                    if self.view == View::Messages && self.msg_scope.is_some() {
                        self.msg_scope = None;
                    } else {
                        self.go_back();
                    }
                }
            }
            KeyCode::Backspace => self.go_back(),
            KeyCode::Down | KeyCode::Char('j') => self.move_sel(live, 1),
            KeyCode::Up | KeyCode::Char('k') => self.move_sel(live, -1),
            KeyCode::PageDown => self.move_sel(live, page),
            KeyCode::PageUp => self.move_sel(live, -page),
            KeyCode::Char('d') if ctrl => self.move_sel(live, page / 2),
            KeyCode::Char('u') if ctrl => self.move_sel(live, -(page / 2)),
            KeyCode::Home | KeyCode::Char('g') => self.move_sel(live, isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_sel(live, isize::MAX / 2),
            KeyCode::Enter => self.enter(live),
            KeyCode::Char('s') if self.view == View::Flows => self.cycle_sort(),
            KeyCode::Char('S') if self.view == View::Flows => {
                self.sort.reverse = !self.sort.reverse
            }
            KeyCode::Char('m') => match self.view {
                View::Flows => {
                    let rows = flow_rows(live, self.sort, &self.flows_filter);
                    if let Some(r) = rows.get(self.flows.sel) {
                        let id = r.id;
                        self.scope_messages(id);
                    }
                }
                View::Detail => {
                    if let Some(id) = self.detail_flow {
                        self.scope_messages(id);
                    }
                }
                _ => {}
            },
            KeyCode::Char('p') if self.view == View::Messages => self.partner(live),
            KeyCode::Left | KeyCode::Char('h') => self.side(-1),
            KeyCode::Right | KeyCode::Char('l') => self.side(1),
            _ => {}
        }
    }

    /// ←/→: the next detail tab, or the other Messages pane.
    fn side(&mut self, d: isize) {
        match self.view {
            View::Detail => {
                self.detail_tab = self.detail_tab.step(d);
                self.detail_list = Cursor::default();
            }
            View::Messages => {
                self.pane = if d > 0 { Pane::Tree } else { Pane::List };
            }
            _ => {}
        }
    }

    fn edit_filter(&mut self, key: KeyEvent) {
        let reset = |app: &mut App| match app.view {
            View::Flows => app.flows = Cursor::default(),
            View::Messages => {
                app.msgs = Cursor::default();
                app.msg_seq = None;
            }
            View::Findings => app.findings = Cursor::default(),
            View::Detail => {}
        };
        match key.code {
            KeyCode::Enter => self.editing = false,
            KeyCode::Esc => {
                if let Some(f) = self.filter_mut() {
                    f.clear();
                }
                self.editing = false;
                reset(self);
            }
            KeyCode::Backspace => {
                if let Some(f) = self.filter_mut() {
                    f.pop();
                }
                reset(self);
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if let Some(f) = self.filter_mut() {
                    if f.len() < 200 {
                        f.push(c);
                    }
                }
                reset(self);
            }
            _ => {}
        }
    }

    pub fn on_mouse(&mut self, ev: MouseEvent, live: &Live) {
        let pos = Position::new(ev.column, ev.row);
        let hit = self
            .hits
            .iter()
            .find(|(r, _)| r.contains(pos))
            .map(|(_, h)| *h);
        match ev.kind {
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let d = if ev.kind == MouseEventKind::ScrollDown {
                    3
                } else {
                    -3
                };
                if self.view == View::Messages {
                    match hit {
                        Some(Hit::TreeRow(_)) => self.pane = Pane::Tree,
                        Some(Hit::MsgRow(_)) => self.pane = Pane::List,
                        _ => {}
                    }
                }
                self.move_sel(live, d);
            }
            MouseEventKind::Down(MouseButton::Left) => {
                self.flash = None;
                if self.help {
                    self.help = false;
                    return;
                }
                if let Some(h) = hit {
                    self.click(h, live);
                }
            }
            _ => {}
        }
    }

    /// A click selects; a click on what is already selected opens it (like Enter).
    fn click(&mut self, hit: Hit, live: &Live) {
        match hit {
            Hit::View(v) => self.go(v),
            Hit::FlowHeader(c) => self.sort_by(c),
            Hit::FlowRow(i) => {
                if self.flows.sel == i {
                    self.enter(live);
                } else {
                    self.flows.sel = i;
                }
            }
            Hit::DetailTab(t) => {
                self.detail_tab = t;
                self.detail_list = Cursor::default();
            }
            Hit::DetailRow(i) => {
                // On tall screens the Opens list shows under a chart tab.
                if matches!(
                    self.detail_tab,
                    DetailTab::Iops | DetailTab::Bandwidth | DetailTab::Latency
                ) {
                    self.detail_tab = DetailTab::Opens;
                }
                if self.detail_list.sel == i {
                    self.enter(live);
                } else {
                    self.detail_list.sel = i;
                }
            }
            Hit::MsgRow(i) => {
                self.pane = Pane::List;
                let shown = message_indices(live, self.msg_scope, &self.msgs_filter);
                self.set_msg_sel(live, &shown, i);
            }
            Hit::TreeRow(i) => {
                self.pane = Pane::Tree;
                self.tree.sel = i;
            }
            Hit::FindingRow(i) => {
                if self.findings.sel == i {
                    self.enter(live);
                } else {
                    self.findings.sel = i;
                }
            }
        }
    }
}
