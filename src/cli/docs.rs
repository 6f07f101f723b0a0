//! `sqos completions SHELL` and `sqos man`: generated from the clap definitions, so they never
//! disagree with `--help`.

use std::path::PathBuf;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos completions bash > ~/.local/share/bash-completion/completions/sqos
  sqos completions zsh > ~/.zfunc/_sqos
  sqos completions fish > ~/.config/fish/completions/sqos.fish")]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Args)]
#[command(after_help = "\
Examples:
  sqos man | man -l -
  sqos man dissect | man -l -
  sqos man --out-dir /usr/local/share/man/man1")]
pub struct ManArgs {
    /// A subcommand's page (`sqos-dissect(1)`…) instead of the main one.
    command: Option<String>,
    /// Write every page (sqos.1, sqos-dissect.1, …) into this directory instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    out_dir: Option<PathBuf>,
}

pub fn completions(a: &CompletionsArgs) -> i32 {
    let mut cmd = Cli::command();
    // Into memory first: the generator panics on a closed pipe.
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "sqos", &mut out);
    let _ = std::io::Write::write_all(&mut std::io::stdout(), &out);
    0
}

pub fn man(a: &ManArgs) -> i32 {
    let cmd = Cli::command();
    if let Some(dir) = &a.out_dir {
        return match std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir))
        {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("sqos man: {}: {e}", dir.display());
                2
            }
        };
    }
    let page = match &a.command {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone().name(format!("sqos-{name}")),
            None => {
                eprintln!("sqos man: no command `{name}`");
                return 2;
            }
        },
    };
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(page).render(&mut out) {
        eprintln!("sqos man: {e}");
        return 2;
    }
    let _ = std::io::Write::write_all(&mut std::io::stdout(), &out);
    0
}
