//! The forecast said while following: a memory whose largest hole will soon be too small for the
//! requests it sees (`memory_forecast`), said once until it recovers.

use super::{FollowEvent, Follower};
use crate::db::Outcome;
use crate::error::Result;

impl Follower<'_> {
    /// Warn of the memories of a node's latest dump whose largest hole is forecast to fall below
    /// their recent requests soon: once a memory, until it recovers (then it may be said again).
    pub(super) fn forecast(
        &mut self,
        run: &str,
        node: i64,
        seq: i64,
        outcome: &Outcome,
        report: &mut dyn FnMut(FollowEvent),
    ) -> Result<()> {
        let Some(within) = self.options.forecast_within else {
            return Ok(());
        };
        let snapshot_id = match outcome {
            Outcome::Imported { snapshot_id, .. }
            | Outcome::Replaced { snapshot_id, .. }
            | Outcome::Unchanged { snapshot_id } => *snapshot_id,
        };
        for forecast in crate::query::forecast::at_snapshot(self.importer.reader(), snapshot_id)? {
            if forecast.warns(within) {
                if self.warned.insert(forecast.memory_id) {
                    report(FollowEvent::Forecast {
                        run,
                        node,
                        seq,
                        forecast: &forecast,
                    });
                }
            } else if forecast.recovered() {
                self.warned.remove(&forecast.memory_id);
            }
        }
        Ok(())
    }
}
