//! Decoding the chosen frames with Debian's `ffmpeg`, run as a child process: H.264, HEVC, AV1
//! and whatever else that build decodes, without linking a codec into streetlevel.
//!
//! Frames are chosen by their index in composition order with the uploader's own `select`
//! expression (a binary search over the indices, so choosing stays cheap for thousands of
//! frames) and written as JPEG at `-qscale:v 2`, as the uploader writes them. The child runs
//! under limits: its address space (`ulimit -v` in the shell that starts it), its wall-clock
//! time (killed when over), the bytes it may write (killed when over) and the number of frames
//! (`-frames:v`). A failure is a [`VideoError::Decode`] with the end of ffmpeg's own message.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::VideoError;

/// What one decode may cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The program to run (default `ffmpeg`, found on `PATH`).
    pub program: PathBuf,
    /// Wall-clock time before the child is killed.
    pub timeout: Duration,
    /// The child's address space (virtual memory) in bytes.
    pub memory_bytes: u64,
    /// The bytes of JPEG it may write.
    pub output_bytes: u64,
    /// Decoder threads (`-threads`).
    pub threads: u32,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            program: PathBuf::from("ffmpeg"),
            timeout: Duration::from_secs(30 * 60),
            memory_bytes: 4 << 30,
            output_bytes: 8 << 30,
            threads: 1,
        }
    }
}

/// The `select` expression choosing the sorted frame indices: a binary search, as the
/// uploader's `generate_binary_search` writes it.
pub fn select_expression(sorted: &[usize]) -> String {
    match sorted.len() {
        0 => String::from("0"),
        1 => format!("eq(n\\,{})", sorted[0]),
        n => {
            let middle = n / 2;
            format!(
                "if(lt(n\\,{})\\,{}\\,{})",
                sorted[middle],
                select_expression(&sorted[..middle]),
                select_expression(&sorted[middle..])
            )
        }
    }
}

/// Decodes the frames at `frames` (indices in composition order, ascending) of stream `stream`
/// of `video` into `out_dir` as `000001.jpg`, `000002.jpg`, ... and returns their paths in
/// order. `out_dir` must exist and be empty.
#[allow(clippy::too_many_lines)] // the command, then its supervision, in one place
pub fn extract_frames(
    video: &Path,
    stream: usize,
    frames: &[usize],
    out_dir: &Path,
    limits: &DecodeLimits,
) -> Result<Vec<PathBuf>, VideoError> {
    if frames.is_empty() {
        return Ok(Vec::new());
    }
    let script = out_dir.join("select.txt");
    std::fs::write(&script, format!("select={}", select_expression(frames)))
        .map_err(|error| VideoError::Io(error.to_string()))?;
    let memory_kib = (limits.memory_bytes / 1024).max(1);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {memory_kib} && exec \"$0\" \"$@\""))
        .arg(&limits.program)
        .args(["-nostdin", "-hide_banner", "-loglevel", "error", "-threads"])
        .arg(limits.threads.max(1).to_string())
        .arg("-i")
        .arg(video)
        .args([
            "-map",
            &format!("0:{stream}"),
            "-an",
            "-sn",
            "-dn",
            "-filter_script:v",
        ])
        .arg(&script)
        .args([
            "-fps_mode",
            "passthrough",
            "-frames:v",
            &frames.len().to_string(),
        ])
        .args(["-qscale:v", "2", "-f", "image2"])
        .arg(out_dir.join("%06d.jpg"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| VideoError::NoDecoder(error.to_string()))?;
    // ffmpeg's messages, read on a thread so a full pipe never stalls it; the last 4 KiB kept.
    let mut stderr = child.stderr.take();
    let messages = std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(stderr) = stderr.as_mut() {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = stderr.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                kept.extend_from_slice(&buffer[..read]);
                if kept.len() > 4096 {
                    kept.drain(..kept.len() - 4096);
                }
            }
        }
        String::from_utf8_lossy(&kept).trim().to_owned()
    });
    let started = Instant::now();
    let over = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|error| VideoError::Io(error.to_string()))?
        {
            break if status.success() {
                None
            } else {
                Some(format!("ffmpeg exited with {status}"))
            };
        }
        if started.elapsed() > limits.timeout {
            break Some(format!(
                "ffmpeg ran over its {} s limit",
                limits.timeout.as_secs()
            ));
        }
        if written_bytes(out_dir) > limits.output_bytes {
            break Some(format!(
                "ffmpeg wrote more than {} bytes",
                limits.output_bytes
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if over.is_some() {
        // Killing a child that has exited already fails harmlessly.
        let _ = child.kill();
        let _ = child.wait();
    }
    let messages = messages.join().unwrap_or_default();
    let _ = std::fs::remove_file(&script);
    if let Some(reason) = over {
        return Err(VideoError::Decode(if messages.is_empty() {
            reason
        } else {
            format!("{reason}: {}", last_lines(&messages))
        }));
    }
    let written: Vec<PathBuf> = (1..=frames.len())
        .map(|number| out_dir.join(format!("{number:06}.jpg")))
        .take_while(|path| path.is_file())
        .collect();
    if written.len() != frames.len() {
        return Err(VideoError::Decode(format!(
            "ffmpeg gave {} of the {} frames chosen{}",
            written.len(),
            frames.len(),
            if messages.is_empty() {
                String::new()
            } else {
                format!(": {}", last_lines(&messages))
            }
        )));
    }
    Ok(written)
}

fn written_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.metadata().ok())
            .map(|metadata| metadata.len())
            .sum()
    })
}

fn last_lines(messages: &str) -> String {
    let lines: Vec<&str> = messages.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // values are exact
mod tests {
    use super::*;

    #[test]
    fn the_select_expression_is_the_uploaders_binary_search() {
        // mapillary_tools ffmpeg.py doctests.
        assert_eq!(select_expression(&[]), "0");
        assert_eq!(select_expression(&[1]), "eq(n\\,1)");
        assert_eq!(
            select_expression(&[1, 2]),
            "if(lt(n\\,2)\\,eq(n\\,1)\\,eq(n\\,2))"
        );
        assert_eq!(
            select_expression(&[1, 2, 3]),
            "if(lt(n\\,2)\\,eq(n\\,1)\\,if(lt(n\\,3)\\,eq(n\\,2)\\,eq(n\\,3)))"
        );
    }
}
