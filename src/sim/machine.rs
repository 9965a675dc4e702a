//! The simulated machine: nodes with their memories, and in each memory the allocations the
//! runtime holds, in the states Realm and Legion give them.
//!
//! A request is placed the way the runtime would: first fit now (`valid`); else deferred into the
//! space that pending releases will free (`pending_alloc` over `pending_free`); else, under
//! pressure, collectable instances are collected (highest GC priority first, then least recently
//! used) and go through `pending_free`; a request that no amount of collection could place fails.

use std::collections::BTreeMap;

use super::allocator::{first_fit, RangeAllocator};
use crate::dump::figures::{intersect, merge, subtract};
use crate::dump::{Range, State};

/// What an allocation is, as the workload sees it.
#[derive(Debug, Clone)]
pub struct Allocation {
    pub uid: u64,
    pub handle: Option<u64>,
    pub kind: &'static str,
    pub state: State,
    pub offset: u64,
    pub size: u64,
    pub alignment: u64,
    pub created_ns: i64,
    pub provenance: String,
    pub label: Option<String>,
    pub gc_priority: Option<i64>,
    /// (field id, field size, object id) when it holds a field of a client object.
    pub field: Option<(i64, u64, String)>,
    /// The step it was last used by a task (for least-recently-used collection).
    pub last_used: u64,
    /// Collected by the garbage collector (shown in the dump's attrs).
    pub collected: bool,
    /// For `pending_free`: the step at which its last users finish and the space is released.
    pub free_at: u64,
}

impl Allocation {
    pub fn range(&self) -> Range {
        Range {
            offset: self.offset,
            size: self.size,
        }
    }
}

/// A request the memory could not satisfy.
#[derive(Debug, Clone)]
pub struct FailedRequest {
    pub size: u64,
    pub alignment: u64,
    pub kind: &'static str,
    pub provenance: String,
    pub time_ns: i64,
    pub note: String,
}

/// Where a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Valid,
    Deferred,
    Failed,
}

/// What a new allocation should look like, apart from where it goes.
#[derive(Debug, Clone)]
pub struct Request {
    pub size: u64,
    pub alignment: u64,
    pub kind: &'static str,
    pub provenance: String,
    pub label: Option<String>,
    pub gc_priority: Option<i64>,
    pub field: Option<(i64, u64, String)>,
    pub with_handle: bool,
}

#[derive(Debug, Clone)]
pub struct Memory {
    pub id: u64,
    pub kind: &'static str,
    pub name: String,
    pub capacity: u64,
    pub alignment: u64,
    pub allocator: RangeAllocator,
    /// By uid.
    pub allocations: BTreeMap<u64, Allocation>,
    pub failed: Vec<FailedRequest>,
    /// Realm instance indices free for reuse (handles are recycled), lowest first.
    free_handles: Vec<u32>,
    next_handle: u32,
    handle_base: u64,
}

impl Memory {
    pub fn new(
        node: u64,
        index: u64,
        kind: &'static str,
        name: String,
        capacity: u64,
        alignment: u64,
    ) -> Memory {
        Memory {
            // Realm's memory ids: tag 0x1e, owner node, memory index.
            id: (0x1e << 56) | (node << 40) | index,
            kind,
            name,
            capacity,
            alignment,
            allocator: RangeAllocator::new(capacity),
            allocations: BTreeMap::new(),
            failed: Vec::new(),
            free_handles: Vec::new(),
            next_handle: 0,
            // Realm's instance ids: tag 0x4, owner node, memory index, instance index.
            handle_base: (0x4 << 60) | (node << 44) | (index << 32),
        }
    }

    fn take_handle(&mut self) -> u64 {
        let index = match self.free_handles.pop() {
            Some(index) => index,
            None => {
                self.next_handle += 1;
                self.next_handle - 1
            }
        };
        self.handle_base | u64::from(index)
    }

    fn release_handle(&mut self, handle: u64) {
        self.free_handles.push((handle & 0xffff_ffff) as u32);
        // Lowest index first, as a free list kept sorted would hand them out.
        self.free_handles.sort_unstable_by(|a, b| b.cmp(a));
    }

    fn ranges_in(&self, state: State) -> impl Iterator<Item = Range> + '_ {
        self.allocations
            .values()
            .filter(move |allocation| allocation.state == state)
            .map(Allocation::range)
    }

    /// Where the space would be once the pending releases finish (and, if `with_collectable`,
    /// once every collectable instance were collected): free ∪ pending_free (∪ collectable),
    /// less what deferred allocations already claimed.
    fn future_free(&self, with_collectable: bool) -> Vec<Range> {
        let collectable: Vec<Range> = if with_collectable {
            self.ranges_in(State::Collectable).collect()
        } else {
            Vec::new()
        };
        let merged = merge(
            self.allocator
                .free_ranges()
                .chain(self.ranges_in(State::PendingFree))
                .chain(collectable),
        );
        let claimed = merge(self.ranges_in(State::PendingAlloc));
        subtract(&merged, &claimed)
    }

    /// Place a request: now, deferred, or after collecting; `Failed` when nothing could place it.
    pub fn request(
        &mut self,
        request: &Request,
        uid: u64,
        step: u64,
        now_ns: i64,
        release_delay: u64,
    ) -> Placement {
        if let Some(offset) = self.allocator.allocate(request.size, request.alignment) {
            self.insert(request, uid, State::Valid, offset, step, now_ns);
            return Placement::Valid;
        }
        // Even collecting everything would not make room: the runtime collects it all anyway,
        // waits for those releases (collectable instances have no users left), and then fails.
        if first_fit(self.future_free(true), request.size, request.alignment).is_none() {
            self.collect_everything();
            return Placement::Failed;
        }
        loop {
            if let Some(offset) =
                first_fit(self.future_free(false), request.size, request.alignment)
            {
                // Reserve the parts of the place that are free now; the rest is pending_free.
                let free_now: Vec<Range> = self.allocator.free_ranges().collect();
                for part in intersect(
                    &free_now,
                    Range {
                        offset,
                        size: request.size,
                    },
                ) {
                    self.allocator.allocate_at(part.offset, part.size);
                }
                self.insert(request, uid, State::PendingAlloc, offset, step, now_ns);
                return Placement::Deferred;
            }
            // Collect one more instance: highest GC priority first, then least recently used.
            let victim = self
                .allocations
                .values()
                .filter(|allocation| allocation.state == State::Collectable)
                .max_by_key(|allocation| {
                    (
                        allocation.gc_priority.unwrap_or(0),
                        std::cmp::Reverse(allocation.last_used),
                        std::cmp::Reverse(allocation.uid),
                    )
                })
                .map(|allocation| allocation.uid);
            match victim {
                Some(uid) => {
                    if let Some(allocation) = self.allocations.get_mut(&uid) {
                        allocation.state = State::PendingFree;
                        allocation.collected = true;
                        allocation.free_at = step + release_delay;
                    }
                }
                None => return Placement::Failed,
            }
        }
    }

    /// Collect every collectable instance and release its space at once.
    fn collect_everything(&mut self) {
        let collectable: Vec<u64> = self
            .allocations
            .values()
            .filter(|allocation| allocation.state == State::Collectable)
            .map(|allocation| allocation.uid)
            .collect();
        self.free_space_of(&collectable);
    }

    /// Remove allocations and give their space back, except the parts that deferred allocations
    /// already claim (those pass to them).
    fn free_space_of(&mut self, uids: &[u64]) {
        let claimed = merge(self.ranges_in(State::PendingAlloc));
        for uid in uids {
            if let Some(allocation) = self.allocations.remove(uid) {
                for part in subtract(&[allocation.range()], &claimed) {
                    self.allocator.free(part.offset, part.size);
                }
                if let Some(handle) = allocation.handle {
                    self.release_handle(handle);
                }
            }
        }
    }

    fn insert(
        &mut self,
        request: &Request,
        uid: u64,
        state: State,
        offset: u64,
        step: u64,
        now_ns: i64,
    ) {
        let handle = request.with_handle.then(|| self.take_handle());
        self.allocations.insert(
            uid,
            Allocation {
                uid,
                handle,
                kind: request.kind,
                state,
                offset,
                size: request.size,
                alignment: request.alignment,
                created_ns: now_ns,
                provenance: request.provenance.clone(),
                label: request.label.clone(),
                gc_priority: request.gc_priority,
                field: request.field.clone(),
                last_used: step,
                collected: false,
                free_at: 0,
            },
        );
    }

    /// Release an allocation: it becomes `pending_free` until `free_at`. A deferred allocation
    /// that never became valid is simply dropped (with its reserved free parts).
    pub fn release(&mut self, uid: u64, free_at: u64) {
        let Some(allocation) = self.allocations.get_mut(&uid) else {
            return;
        };
        match allocation.state {
            State::PendingFree => {}
            State::PendingAlloc => {
                let range = allocation.range();
                let handle = allocation.handle;
                self.allocations.remove(&uid);
                // Its free parts were reserved; the parts under pending_free stay with those.
                let pending_free = merge(self.ranges_in(State::PendingFree));
                for part in subtract(&[range], &pending_free) {
                    self.allocator.free(part.offset, part.size);
                }
                if let Some(handle) = handle {
                    self.release_handle(handle);
                }
            }
            _ => {
                allocation.state = State::PendingFree;
                allocation.free_at = free_at;
            }
        }
    }

    /// Finish the pending releases due by `step`; deferred allocations whose space is now all
    /// theirs become valid. Returns the uids that became valid.
    pub fn complete_releases(&mut self, step: u64) -> Vec<u64> {
        let due: Vec<u64> = self
            .allocations
            .values()
            .filter(|allocation| {
                allocation.state == State::PendingFree && allocation.free_at <= step
            })
            .map(|allocation| allocation.uid)
            .collect();
        if due.is_empty() {
            return Vec::new();
        }
        self.free_space_of(&due);
        let pending_free = merge(self.ranges_in(State::PendingFree));
        let mut now_valid = Vec::new();
        for allocation in self.allocations.values_mut() {
            if allocation.state == State::PendingAlloc
                && intersect(&pending_free, allocation.range()).is_empty()
            {
                allocation.state = State::Valid;
                now_valid.push(allocation.uid);
            }
        }
        now_valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(size: u64) -> Request {
        Request {
            size,
            alignment: 1,
            kind: "instance",
            provenance: "t.py:1".into(),
            label: None,
            gc_priority: None,
            field: None,
            with_handle: true,
        }
    }

    #[test]
    fn a_request_that_fits_only_after_a_release_is_deferred_then_valid() {
        let mut memory = Memory::new(0, 1, "GPU_FB_MEM", "gpu".into(), 100, 1);
        assert_eq!(memory.request(&request(60), 1, 0, 0, 2), Placement::Valid);
        assert_eq!(memory.request(&request(40), 2, 0, 0, 2), Placement::Valid);
        memory.release(1, 5);
        assert_eq!(
            memory.request(&request(50), 3, 1, 0, 2),
            Placement::Deferred
        );
        let deferred = &memory.allocations[&3];
        assert_eq!((deferred.state, deferred.offset), (State::PendingAlloc, 0));
        assert!(memory.complete_releases(4).is_empty());
        assert_eq!(memory.complete_releases(5), vec![3]);
        assert_eq!(memory.allocations[&3].state, State::Valid);
        // The 10 bytes of the release not claimed by the deferred allocation are free again.
        assert_eq!(
            memory.allocator.free_ranges().collect::<Vec<_>>(),
            vec![Range {
                offset: 50,
                size: 10
            }]
        );
    }

    #[test]
    fn collection_takes_the_highest_priority_then_least_recently_used() {
        let mut memory = Memory::new(0, 1, "GPU_FB_MEM", "gpu".into(), 90, 1);
        for uid in 1..=3 {
            assert_eq!(
                memory.request(&request(30), uid, uid, 0, 2),
                Placement::Valid
            );
            memory.allocations.get_mut(&uid).unwrap().state = State::Collectable;
        }
        memory.allocations.get_mut(&3).unwrap().gc_priority = Some(5);
        assert_eq!(
            memory.request(&request(30), 4, 9, 0, 2),
            Placement::Deferred
        );
        assert!(memory.allocations[&3].collected, "highest priority first");
        assert_eq!(
            memory.request(&request(30), 5, 9, 0, 2),
            Placement::Deferred
        );
        assert!(
            memory.allocations[&1].collected,
            "then the least recently used"
        );
        assert_eq!(memory.allocations[&2].state, State::Collectable);
        // Bigger than any range collection could make: everything collectable is collected and
        // released, and the request still fails.
        assert_eq!(memory.request(&request(91), 6, 9, 0, 2), Placement::Failed);
        assert!(!memory.allocations.contains_key(&2));
    }
}
