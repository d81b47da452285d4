//! The text table nccl-tests prints on stdout.
//!
//! Columns are located by the names in the `#  size  count  type …` header rather than by
//! position, because versions differ: `redop root` appeared in 2.13, `-I 1` adds per-iteration
//! columns, `-S 1` a timestamp, RCCL appends its own. The first `busbw`/`algbw`/`time`/`#wrong`
//! group is the out-of-place run, the second the in-place run.

use super::{Measurement, NAME, Report, SizeResult, Source};
use crate::benchmark::{
    ParseError,
    numbers::{count, decimal},
};

/// Column indexes of one half (out-of-place or in-place) of a row.
#[derive(Debug, Clone, Copy)]
struct Half {
    time: usize,
    algbw: usize,
    busbw: usize,
    wrong: Option<usize>,
}

/// Column indexes of the whole row.
#[derive(Debug, Clone)]
struct Columns {
    size: usize,
    data_type: Option<usize>,
    halves: Vec<Half>,
    /// Fewest tokens a data row must have.
    width: usize,
}

impl Columns {
    /// Reads a header line; `None` if it is not the column header.
    fn from_header(line: &str) -> Option<Columns> {
        let names: Vec<&str> = line.trim_start_matches('#').split_whitespace().collect();
        let size = names.iter().position(|n| *n == "size")?;
        let all = |wanted: &[&str]| -> Vec<usize> {
            names
                .iter()
                .enumerate()
                .filter(|(_, n)| wanted.contains(n))
                .map(|(i, _)| i)
                .collect()
        };
        let times = all(&["time", "cputime"]);
        let algbws = all(&["algbw"]);
        let busbws = all(&["busbw"]);
        let wrongs = all(&["#wrong"]);
        if busbws.is_empty() || busbws.len() != algbws.len() || busbws.len() != times.len() {
            return None;
        }
        let halves: Vec<Half> = (0..busbws.len().min(2))
            .map(|i| Half {
                time: times[i],
                algbw: algbws[i],
                busbw: busbws[i],
                wrong: wrongs.get(i).copied(),
            })
            .collect();
        let width = halves
            .iter()
            .flat_map(|h| [h.time, h.algbw, h.busbw].into_iter().chain(h.wrong))
            .chain([size])
            .max()
            .map_or(0, |m| m + 1);
        Some(Columns {
            size,
            data_type: names.iter().position(|n| *n == "type"),
            halves,
            width,
        })
    }
}

/// Reads the table; the footer (`# Out of bounds values`, `# Avg bus bandwidth`) must be
/// there too, or the run did not finish.
pub(super) fn read(output: &str) -> Result<Report, ParseError> {
    let mut columns: Option<Columns> = None;
    let mut rows = Vec::new();
    let mut out_of_bounds = None;
    let mut average = None;
    let mut average_okay = None;
    let mut errors = Vec::new();

    for (index, line) in output.lines().enumerate() {
        let line_no = index + 1;
        let trimmed = line.trim();
        if let Some(comment) = trimmed.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(value) = footer_value(comment, "Out of bounds values") {
                let n = value
                    .split_whitespace()
                    .next()
                    .and_then(decimal)
                    .as_ref()
                    .and_then(count)
                    .ok_or_else(|| {
                        ParseError::at(NAME, line_no, "`Out of bounds values` is not a count")
                    })?;
                out_of_bounds = Some(n);
            } else if let Some(value) = footer_value(comment, "Avg bus bandwidth") {
                let mut words = value.split_whitespace();
                let bw = words.next().and_then(decimal).ok_or_else(|| {
                    ParseError::at(NAME, line_no, "`Avg bus bandwidth` is not a number")
                })?;
                average = Some(bw);
                average_okay = match words.next() {
                    Some("OK") => Some(true),
                    Some("FAILED") => Some(false),
                    _ => None,
                };
            } else if let Some(error) = comment.strip_prefix("error:") {
                errors.push(error.trim().to_owned());
            } else if columns.is_none() {
                columns = Columns::from_header(trimmed);
            }
            continue;
        }
        let Some(cols) = &columns else { continue };
        if average.is_some() {
            continue;
        }
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        // Only lines that start with a size are rows; MPI and NCCL chatter is skipped.
        let Some(size_bytes) = tokens.get(cols.size).and_then(|t| t.parse::<u64>().ok()) else {
            continue;
        };
        rows.push(read_row(&tokens, size_bytes, cols, line_no)?);
    }

    if columns.is_none() {
        return Err(ParseError::whole(
            NAME,
            "no result table (no `#  size  count  type …` header) in the log",
        ));
    }
    let Some(average_bus_bandwidth) = average else {
        return Err(ParseError::whole(
            NAME,
            "no `# Avg bus bandwidth` line: the run did not finish",
        ));
    };
    Ok(Report {
        source: Source::Table,
        rows,
        out_of_bounds: out_of_bounds.unwrap_or(0),
        average_bus_bandwidth,
        average_okay,
        errors,
    })
}

/// The text after `label` and its `:` separator in a footer line.
fn footer_value<'a>(comment: &'a str, label: &str) -> Option<&'a str> {
    let rest = comment.strip_prefix(label)?.trim_start();
    rest.strip_prefix(':').map(str::trim)
}

fn read_row(
    tokens: &[&str],
    size_bytes: u64,
    cols: &Columns,
    line_no: usize,
) -> Result<SizeResult, ParseError> {
    if tokens.len() < cols.width {
        return Err(ParseError::at(
            NAME,
            line_no,
            format!(
                "expected at least {} columns, found {}",
                cols.width,
                tokens.len()
            ),
        ));
    }
    let number = |i: usize, what: &str| {
        decimal(tokens[i]).ok_or_else(|| {
            ParseError::at(
                NAME,
                line_no,
                format!("{what} `{}` is not a number", tokens[i]),
            )
        })
    };
    let mut halves = Vec::new();
    for half in &cols.halves {
        let wrong = match half.wrong.map(|i| tokens[i]) {
            None | Some("N/A") => None,
            Some(token) => Some(decimal(token).as_ref().and_then(count).ok_or_else(|| {
                ParseError::at(NAME, line_no, format!("#wrong `{token}` is not a count"))
            })?),
        };
        halves.push(Measurement {
            time_us: number(half.time, "time")?,
            alg_bandwidth: number(half.algbw, "algbw")?,
            bus_bandwidth: number(half.busbw, "busbw")?,
            wrong,
        });
    }
    let mut halves = halves.into_iter();
    Ok(SizeResult {
        size_bytes,
        data_type: cols
            .data_type
            .and_then(|i| tokens.get(i))
            .map(|t| (*t).to_owned())
            .unwrap_or_default(),
        out_of_place: halves.next(),
        in_place: halves.next(),
    })
}
