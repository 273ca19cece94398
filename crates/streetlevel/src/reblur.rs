//! `streetlevel reblur`: blurring again the images a different blurrer blurred (a new model, a
//! plate model added, an external service), or all of them with `--all`, on a data
//! directory's `SQLite` file or with `--database-url` on PostgreSQL, also while servers run
//! on it. One line per image and a progress bar; an interrupted run is taken up by the next.

use std::io::Write as _;
use std::sync::RwLock;
use std::sync::atomic::AtomicBool;

use indicatif::{ProgressBar, ProgressStyle};
use streetlevel_import::{Blurring, ReblurProgress, Selection, Source};

/// Options of `streetlevel reblur`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: crate::takedown::DataArgs,
    /// Blur every image again, not only those another blurrer blurred; an interrupted
    /// `--all` run is taken up where it stopped.
    #[arg(long, conflicts_with = "status")]
    all: bool,
    /// Blur nothing: print how many images the blurrer configured now blurred, how many an
    /// older one did (by blurrer) and how many none did, which a run without `--all` redoes.
    #[arg(long)]
    status: bool,
    #[command(flatten)]
    blur: crate::blur::BlurArgs,
    #[command(flatten)]
    memory: crate::import::PictureMemoryArgs,
}

/// Runs `streetlevel reblur`; fails (non-zero exit) when an image could not be blurred again.
#[allow(clippy::print_stdout)]
#[allow(clippy::too_many_lines)] // the command's steps and its progress display, in one place
pub fn run(args: &Args) -> anyhow::Result<()> {
    args.memory.apply();
    let blurrer = match args.blur.blurring() {
        Blurring::On { blurrer, .. } => blurrer,
        Blurring::Off => anyhow::bail!("reblur blurs: drop --blur false"),
        Blurring::Unusable(reason) => anyhow::bail!("nothing was blurred again: {reason}"),
    };
    let store = RwLock::new(crate::takedown::open_store(&args.data)?);
    let data_dir = args.data.data_dir();
    if args.status {
        return print_status(&streetlevel_import::blur_status(
            &store,
            &blurrer.fingerprint(),
        )?);
    }
    eprintln!("blurring with {}", blurrer.fingerprint());
    let bar = std::sync::Mutex::new(None::<ProgressBar>);
    let noted_published = AtomicBool::new(false);
    let show = |step: ReblurProgress| {
        let mut bar = bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match step {
            ReblurProgress::Started { total, resumed } => {
                println!(
                    "{total} images to blur again{}",
                    if resumed {
                        " (taking up the interrupted --all run)"
                    } else {
                        ""
                    }
                );
                let new = ProgressBar::new(total as u64);
                if let Ok(style) = ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} images blurred again ({per_sec}, eta {eta})",
                ) {
                    new.set_style(style);
                }
                *bar = Some(new);
            }
            ReblurProgress::Image {
                done,
                total,
                id,
                outcome,
            } => {
                let line = match outcome {
                    Ok(Source::Unblurred) => String::from("from its unblurred original"),
                    Ok(Source::NeverBlurred) => {
                        String::from("never blurred before: from its published picture")
                    }
                    Ok(Source::Published) => {
                        if !noted_published.swap(true, std::sync::atomic::Ordering::Relaxed) {
                            println!(
                                "note: no unblurred original is kept for some images \
                                 (keep_unblurred was off): their blur can only be added to the \
                                 already blurred picture, so what the old blurrer blurred stays \
                                 blurred"
                            );
                        }
                        String::from("blur added to the already blurred picture")
                    }
                    Err(reason) => format!("not blurred again: {reason}"),
                };
                println!("{done}/{total} image {id}: {line}");
                if let Some(bar) = bar.as_ref() {
                    bar.set_position(done as u64);
                }
            }
        }
    };
    let report = streetlevel_import::reblur(
        &store,
        data_dir,
        blurrer.as_ref(),
        if args.all {
            Selection::All
        } else {
            Selection::Outdated
        },
        &show,
        &AtomicBool::new(false),
    )?;
    if let Some(bar) = bar
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        bar.finish();
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "blurred again {} images: {} from their unblurred original, {} with blur added to the \
         blurred picture, {} never blurred before; {} not blurred again. Cached pyramid tiles \
         were removed; a CDN in front purges the surrogate key image/<id> of each.",
        report.from_unblurred + report.from_published + report.never_blurred,
        report.from_unblurred,
        report.from_published,
        report.never_blurred,
        report.refused.len(),
    )?;
    anyhow::ensure!(
        report.refused.is_empty(),
        "{} images could not be blurred again (listed above); run reblur again once fixed",
        report.refused.len()
    );
    Ok(())
}

/// `streetlevel reblur --status`: the counts, then each older blurrer with its count.
#[allow(clippy::print_stdout)]
fn print_status(status: &streetlevel_import::BlurStatus) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} images: {} blurred by the blurrer configured now, {} by an older one, {} never \
         blurred; {} to blur again (`streetlevel reblur`)",
        status.images,
        status.current,
        status.stale(),
        status.never_blurred(),
        status.outdated()
    )?;
    for (blurrer, count) in &status.older {
        writeln!(out, "{count} blurred by {blurrer}")?;
    }
    Ok(())
}
