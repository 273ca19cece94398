//! The engine: `pycolmap` in a virtual environment that the project's setup installs
//! (`cargo xtask models` pins the wheel by its SHA-256), driven by `driver.py` (kept in this
//! crate, written next to each run's input) as a child process under limits.
//!
//! The child gets explicit arguments and no shell: `setpriv --pdeathsig KILL` (so it dies
//! with the thread that started it, also when the server is killed), `nice` (below the CPU
//! pool's own priority), then the interpreter in isolated mode (`-I -B`: no user site, no
//! `PYTHON*` variables, no bytecode written) with the driver and the work directory. Its
//! environment is emptied but for a few variables (threads of numerical libraries, glog's
//! level). It is killed when it runs over its time limit or when the caller asks it to stop;
//! its standard error's last 8 KiB are kept for the reason of a failure, and its standard
//! output gives the stage it is at.

use std::io::{BufRead as _, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::SfmError;

/// The driver's source, written into each run's work directory.
pub const DRIVER: &str = include_str!("driver.py");
/// The engine's package and version the driver is written for.
pub const ENGINE_VERSION: &str = "4.2.1";
/// Standard error kept from a run (its end).
const STDERR_KEPT: usize = 8192;

/// How the engine runs.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineOptions {
    /// Threads the engine may use.
    pub threads: usize,
    /// Wall-clock time of one run before it is killed.
    pub time_limit: Duration,
    /// Added to the nice value of the thread that starts the run.
    pub nice: i32,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            threads: 2,
            time_limit: Duration::from_secs(3600),
            nice: 9,
        }
    }
}

/// A usable engine: an interpreter that imports the pinned `pycolmap`.
#[derive(Debug, Clone)]
pub struct Engine {
    python: PathBuf,
    /// `setpriv`, when the system has it.
    setpriv: Option<PathBuf>,
    options: EngineOptions,
}

/// What the driver reports about one run (`report.json`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct DriverReport {
    /// `pycolmap <version>`.
    pub engine: String,
    /// The mapper whose result was kept, `None` when none ran.
    pub mapper: Option<String>,
    /// Images given.
    pub images: usize,
    /// One entry per reconstruction.
    pub models: Vec<ModelReport>,
    /// CPU seconds per stage.
    pub cpu_seconds: std::collections::BTreeMap<String, f64>,
    /// CPU seconds of the whole run.
    pub cpu_total_seconds: f64,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// The driver's peak resident memory (KiB).
    pub peak_rss_kb: u64,
}

/// One reconstruction of a run.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ModelReport {
    /// Images it registered.
    pub registered: usize,
    /// Points it triangulated.
    pub points: usize,
    /// Whether it could be aligned to the GPS positions (only aligned ones are written).
    pub aligned: bool,
    /// Its directory under the work directory (`model/<k>`).
    pub dir: Option<String>,
    /// The similarity's scale from the engine's units to metres.
    pub scale: Option<f64>,
}

impl ModelReport {
    /// The model's directory under `work`, if it was written and its name is one the driver
    /// gives (`model/<digits>`): nothing else under or outside the work directory is read.
    pub fn directory(&self, work: &Path) -> Option<PathBuf> {
        let dir = self.dir.as_deref()?;
        let index = dir.strip_prefix("model/")?;
        (!index.is_empty() && index.bytes().all(|byte| byte.is_ascii_digit()))
            .then(|| work.join("model").join(index))
    }
}

/// The default engine directory: `sfm/` next to the executable when it holds the virtual
/// environment, else the source tree's `target/streetlevel-sfm`, which `cargo xtask models`
/// fills.
pub fn default_engine_dir(manifest_dir: &Path) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|executable| Some(executable.parent()?.join("sfm")))
        .filter(|dir| dir.join("venv/bin/python").exists())
        .unwrap_or_else(|| manifest_dir.join("../../target/streetlevel-sfm"))
}

impl Engine {
    /// The engine of the virtual environment in `dir` (`dir/venv/bin/python`), checked by
    /// importing the engine once: the reason when it cannot run.
    pub fn find(dir: &Path, options: EngineOptions) -> Result<Self, SfmError> {
        // Absolute (symbolic links kept: the environment's `python` is one), since the
        // driver runs in its work directory.
        let python = dir.join("venv/bin/python");
        let python = std::path::absolute(&python).unwrap_or(python);
        if !python.exists() {
            return Err(SfmError::EngineMissing(format!(
                "no {} (install it with `cargo xtask models`, or point --sfm-engine-dir at a \
                 virtual environment with pycolmap {ENGINE_VERSION})",
                python.display()
            )));
        }
        let output = Command::new(&python)
            .args([
                "-I",
                "-B",
                "-c",
                "import pycolmap; print(pycolmap.__version__)",
            ])
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .map_err(|error| {
                SfmError::EngineMissing(format!("cannot start {}: {error}", python.display()))
            })?;
        let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() {
            return Err(SfmError::EngineMissing(format!(
                "{} cannot import pycolmap: {}",
                python.display(),
                last_line(&String::from_utf8_lossy(&output.stderr))
            )));
        }
        if version != ENGINE_VERSION {
            return Err(SfmError::EngineMissing(format!(
                "{} has pycolmap {version}, the driver is written for {ENGINE_VERSION}",
                python.display()
            )));
        }
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .map(PathBuf::from)
            .find(|path| path.exists());
        if setpriv.is_none() {
            tracing::warn!("no setpriv (util-linux): an engine run may outlive a killed server");
        }
        Ok(Engine {
            python,
            setpriv,
            options,
        })
    }

    /// How runs are bounded.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Runs the driver on `work` (which holds `input.json` and `images/`) and returns its
    /// report. `stop` is asked every tenth of a second; when it answers true the child is
    /// killed and [`SfmError::Interrupted`] returned. `stage` gets each stage the driver
    /// reaches.
    #[allow(clippy::too_many_lines)] // the command, then its supervision, in one place
    pub fn run(
        &self,
        work: &Path,
        stop: &dyn Fn() -> bool,
        stage: &dyn Fn(&str),
    ) -> Result<DriverReport, SfmError> {
        let driver = work.join("driver.py");
        std::fs::write(&driver, DRIVER)?;
        let _ = std::fs::remove_file(work.join("report.json"));
        let mut command = if let Some(setpriv) = &self.setpriv {
            let mut command = Command::new(setpriv);
            command.args(["--pdeathsig", "KILL", "--", "nice", "-n"]);
            command
        } else {
            let mut command = Command::new("nice");
            command.arg("-n");
            command
        };
        let threads = self.options.threads.max(1).to_string();
        command
            .arg(self.options.nice.to_string())
            .arg(&self.python)
            .args(["-I", "-B"])
            .arg(&driver)
            .arg(work)
            .current_dir(work)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", work)
            .env("LANG", "C.UTF-8")
            .env("OMP_NUM_THREADS", &threads)
            .env("OPENBLAS_NUM_THREADS", "1")
            .env("GLOG_minloglevel", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|error| {
            SfmError::EngineMissing(format!("cannot start the engine: {error}"))
        })?;
        let stages = Arc::new(Mutex::new(Vec::<String>::new()));
        let stdout = child.stdout.take();
        let seen = Arc::clone(&stages);
        let reader = std::thread::spawn(move || {
            if let Some(stdout) = stdout {
                for line in std::io::BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                    .take(64)
                {
                    seen.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(line.chars().take(80).collect());
                }
            }
        });
        let stderr = child.stderr.take();
        let messages = std::thread::spawn(move || {
            let mut kept = Vec::new();
            if let Some(mut stderr) = stderr {
                let mut buffer = [0u8; 4096];
                while let Ok(read) = stderr.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    kept.extend_from_slice(&buffer[..read]);
                    if kept.len() > STDERR_KEPT {
                        kept.drain(..kept.len() - STDERR_KEPT);
                    }
                }
            }
            String::from_utf8_lossy(&kept).into_owned()
        });
        let started = Instant::now();
        let mut reported = 0;
        let outcome = loop {
            {
                let stages = stages.lock().unwrap_or_else(PoisonError::into_inner);
                for line in &stages[reported..] {
                    stage(line);
                }
                reported = stages.len();
            }
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(error) => break Err(SfmError::Engine(error.to_string())),
            }
            if stop() {
                break Err(SfmError::Interrupted);
            }
            if started.elapsed() > self.options.time_limit {
                break Err(SfmError::Engine(format!(
                    "ran over its {} s limit",
                    self.options.time_limit.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        if outcome.is_err() {
            // Killing a child that has exited already fails harmlessly.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = reader.join();
        let messages = messages.join().unwrap_or_default();
        let status = outcome?;
        if !status.success() {
            return Err(SfmError::Engine(format!(
                "the driver exited with {status}: {}",
                last_line(&messages)
            )));
        }
        let report = std::fs::read(work.join("report.json")).map_err(|error| {
            SfmError::Engine(format!(
                "the driver wrote no report ({error}): {}",
                last_line(&messages)
            ))
        })?;
        if report.len() > 1 << 20 {
            return Err(SfmError::Engine(String::from(
                "the driver's report is too large",
            )));
        }
        serde_json::from_slice(&report).map_err(|error| {
            SfmError::Engine(format!("the driver's report is unreadable: {error}"))
        })
    }
}

/// The last line of a program's messages that says something.
fn last_line(messages: &str) -> String {
    messages
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("(no message)")
        .chars()
        .take(500)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_model_directories_the_driver_names_are_read() {
        let work = Path::new("/w");
        let report = |dir: &str| ModelReport {
            registered: 3,
            points: 10,
            aligned: true,
            dir: Some(dir.to_owned()),
            scale: Some(1.0),
        };
        assert_eq!(
            report("model/0").directory(work),
            Some(PathBuf::from("/w/model/0"))
        );
        assert_eq!(
            report("model/12").directory(work),
            Some(PathBuf::from("/w/model/12"))
        );
        for hostile in [
            "model/../../etc",
            "/etc",
            "model/",
            "model/1/..",
            "model/-1",
            "other/1",
        ] {
            assert_eq!(report(hostile).directory(work), None, "{hostile}");
        }
    }

    #[test]
    fn a_missing_engine_says_where_it_looked_and_how_to_install_it() {
        let error =
            Engine::find(Path::new("/nonexistent/sfm"), EngineOptions::default()).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("/nonexistent/sfm/venv/bin/python"), "{text}");
        assert!(text.contains("cargo xtask models"), "{text}");
    }

    #[test]
    fn a_relative_engine_folder_is_taken_from_the_current_directory() {
        // `--sfm-engine-dir target/streetlevel-sfm`: the driver runs in its work directory,
        // so the interpreter must be named from the root.
        let error = Engine::find(Path::new("no-such-folder/sfm"), EngineOptions::default())
            .unwrap_err()
            .to_string();
        let expected = std::env::current_dir()
            .unwrap()
            .join("no-such-folder/sfm/venv/bin/python");
        assert!(error.contains(&expected.display().to_string()), "{error}");
    }

    #[test]
    fn the_last_line_that_says_something_is_the_reason() {
        assert_eq!(last_line("a\nRuntimeError: no\n\n  \n"), "RuntimeError: no");
        assert_eq!(last_line(""), "(no message)");
    }
}
