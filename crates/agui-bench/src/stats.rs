//! Percentiles and latency summaries (pure).

use std::time::Duration;

use serde::Serialize;

/// Linear-interpolated percentile of `sorted` (ascending), `p` in 0..=100: numpy's `linear`,
/// the same as the reference benchmark's `pct`. `None` when empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    match sorted {
        [] => None,
        [only] => Some(*only),
        _ => {
            let k = (sorted.len() - 1) as f64 * p / 100.0;
            let f = k.floor() as usize;
            let c = (f + 1).min(sorted.len() - 1);
            Some(sorted[f] + (sorted[c] - sorted[f]) * (k - f as f64))
        }
    }
}

/// p50/p90/p99/max/min/mean of a set of durations, in milliseconds (`n == 0`: all `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Summary {
    pub(crate) n: usize,
    pub(crate) p50: Option<f64>,
    pub(crate) p90: Option<f64>,
    pub(crate) p99: Option<f64>,
    pub(crate) max: Option<f64>,
    pub(crate) min: Option<f64>,
    pub(crate) mean: Option<f64>,
}

impl Summary {
    /// The summary of `values` given in milliseconds.
    pub(crate) fn of_ms(values: impl IntoIterator<Item = f64>) -> Self {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Self::default();
        }
        v.sort_by(f64::total_cmp);
        let round = |x: f64| (x * 100.0).round() / 100.0;
        let pct = |p| percentile(&v, p).map(round);
        Self {
            n: v.len(),
            p50: pct(50.0),
            p90: pct(90.0),
            p99: pct(99.0),
            max: v.last().copied().map(round),
            min: v.first().copied().map(round),
            mean: Some(round(v.iter().sum::<f64>() / v.len() as f64)),
        }
    }

    /// The summary of `durations` (absent ones skipped).
    pub(crate) fn of(durations: impl IntoIterator<Item = Option<Duration>>) -> Self {
        Self::of_ms(durations.into_iter().flatten().map(ms))
    }

    /// A percentile by name (`p50`, `p90`, `p99`, `max`).
    pub(crate) fn get(&self, which: &str) -> Option<f64> {
        match which {
            "p50" => self.p50,
            "p90" => self.p90,
            "p99" => self.p99,
            "max" => self.max,
            "min" => self.min,
            "mean" => self.mean,
            _ => None,
        }
    }
}

/// A duration in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The mean of `values`, `None` when empty.
pub(crate) fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// `a / b` when both are known and `b` is not zero.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b.abs() > f64::EPSILON => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        // (n-1)*0.9 = 2.7 → 3 + 0.7*(4-3)
        assert!((percentile(&v, 90.0).unwrap() - 3.7).abs() < 1e-9);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn summaries_sort_round_and_skip_missing() {
        let s = Summary::of([
            Some(Duration::from_millis(30)),
            None,
            Some(Duration::from_millis(10)),
            Some(Duration::from_micros(20_004)),
        ]);
        assert_eq!(s.n, 3);
        assert_eq!(s.p50, Some(20.0));
        assert_eq!(s.min, Some(10.0));
        assert_eq!(s.max, Some(30.0));
        assert_eq!(s.get("p50"), s.p50);
        assert_eq!(Summary::of_ms([]), Summary::default());
        assert_eq!(Summary::of_ms([f64::NAN, 2.0]).n, 1);
    }

    #[test]
    fn ratios_and_means_need_data() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
        assert_eq!(mean([1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean([]), None);
    }
}
