//! The integration tests: one crate (one link), a module per area. Modules named `*_kit`,
//! `*_build`, `*_common` and `support` are shared helpers; tests that need what a plain clone
//! lacks (tshark, tmux, Wireshark, ../shared) are switched: see `support::need`.

mod analysis_captures;
mod analysis_faulty_server_cli;
mod analysis_figures;
mod analysis_findings;
mod analysis_kit;
mod analysis_memory;
mod analysis_output;
mod analysis_spec_examples;
mod analysis_state;
mod analysis_synth;
mod capture_encapsulations;
mod capture_formats;
mod capture_real;
mod capture_stdin;
mod check_baseline;
mod check_captures;
mod check_cli;
mod check_junit;
mod check_rules;
mod export_parquet;
mod interop_tshark;
mod net_props;
mod net_real;
mod net_reassembly;
mod net_throughput;
mod pipeline_exchange;
mod pipeline_frames;
mod pipeline_real_captures;
mod plugin_gui;
mod plugin_tshark;
mod smb2_bodies;
mod smb2_build;
mod smb2_framing;
mod smb2_framing_props;
mod sqos_findings;
mod sqos_props;
mod sqos_spec_examples;
mod support;
mod synth_captures;
mod synth_common;
mod synth_scenarios;
mod tui_e2e;
mod tui_render;
mod tui_render_captures;
