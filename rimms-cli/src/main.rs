//! The `rimms` command: benchmark the pipelines on the devices this machine has.

mod bench;
mod pipelines;

use clap::{Parser, Subcommand};
use pipelines::App;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "rimms",
    version,
    about = "RIMMS: runtime-integrated memory management for heterogeneous machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every pipeline on every mapping available here, baseline (CEDR) against tracked (RIMMS).
    Bench {
        /// Frames per cell (the median frame is reported).
        #[arg(long, default_value_t = 40)]
        frames: usize,
        /// Only these pipelines.
        #[arg(long, value_enum)]
        app: Vec<App>,
        /// Print one JSON array instead of the table.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Bench { frames, app, json } => {
            if frames == 0 {
                eprintln!("rimms bench: --frames must be at least 1");
                return ExitCode::from(2);
            }
            let apps = if app.is_empty() {
                App::ALL.to_vec()
            } else {
                app
            };
            let progress = |what: &str| {
                if !json {
                    eprintln!("running {what} ...");
                }
            };
            match bench::run(frames, &apps, progress) {
                Ok(rows) => {
                    if json {
                        println!("{}", bench::json(&rows, frames));
                    } else {
                        print!("{}", bench::table(&rows, frames));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("rimms bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
