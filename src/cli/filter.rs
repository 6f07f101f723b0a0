//! The filter options every listing command shares: `-Y EXPR` and its shortcuts.

use clap::Args;

use sqos::filter::{Context, Filter, Shortcuts};

#[derive(Args, Clone, Default)]
pub struct FilterArgs {
    /// Display filter over message and flow fields (docs/filter.md), e.g.
    /// `flow.initiator_name == "vm03" and nt_status != 0`.
    #[arg(short = 'Y', long = "display-filter", value_name = "EXPR")]
    pub display: Option<String>,
    /// Only this flow: its LogicalFlowID (or its first characters) or its initiator name
    /// (`*` `?` wildcards); repeat for several.
    #[arg(long = "flow", value_name = "ID|NAME")]
    pub flows: Vec<String>,
    /// Only the flows of this VM (initiator name, `*` `?` wildcards); repeat for several.
    #[arg(long = "vm", value_name = "NAME")]
    pub vms: Vec<String>,
    /// Only what carries this finding code (`*` wildcards: `flow.server_*`); repeat for several.
    #[arg(long = "finding", value_name = "CODE")]
    pub findings: Vec<String>,
    /// Only messages in this window: seconds from the first frame (`10..20`, `30..`) or dates
    /// (`2024-05-01T10:00:00Z..2024-05-01T10:05:00Z`; without a zone: local time).
    #[arg(long = "time", value_name = "FROM..TO")]
    pub time: Option<String>,
}

impl FilterArgs {
    /// The compiled filter, or the exit code 2 after printing what is wrong (a caret under it).
    pub fn build(&self, ctx: Context) -> Result<Option<Filter>, i32> {
        let sc = Shortcuts {
            flows: self.flows.clone(),
            vms: self.vms.clone(),
            findings: self.findings.clone(),
            time: self.time.clone(),
        };
        Filter::build(ctx, self.display.as_deref(), &sc).map_err(|e| {
            match (&self.display, e.span()) {
                (Some(src), Some(_)) => eprintln!("sqos: -Y: {}", e.render(src)),
                _ => eprintln!("sqos: {e}"),
            }
            2
        })
    }
}
