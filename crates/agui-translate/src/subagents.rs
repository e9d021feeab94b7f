//! Which invocation started which subagent trajectory, and subagent brackets
//! (`STEP_STARTED`/`STEP_FINISHED` around an invocation and the lifetime of the subagent
//! trajectories it started, for [`SubagentEvents::Steps`]).
//!
//! [`SubagentEvents::Steps`]: crate::SubagentEvents::Steps

use std::collections::{BTreeSet, HashMap, HashSet};

use agui_types::Event;
use harness_proto::step::StepKey;

/// Longest label (in characters) taken from a step's summary for a step name.
const MAX_LABEL_CHARS: usize = 80;

/// The subagent brackets of the turn.
///
/// The harness reports an invocation as a root step with an empty `invokeSubagent` action,
/// then each subagent as a trajectory (`RUNNING` with its parent … `FULLY_IDLE`) whose steps
/// arrive on the same socket. A bracket is opened by the invocation step (even one first seen
/// at DONE), collects the trajectories its invoker starts while the invocation runs, and
/// closes when the invocation is final and all of them are idle, so their own events fall
/// inside it. A trajectory with no known invocation gets a bracket of its own. A bracket closed
/// at a run boundary is re-opened (same name) when its subagents produce more output.
#[derive(Debug, Default)]
pub(crate) struct Subagents {
    brackets: Vec<Bracket>,
    /// Subagent trajectory → its bracket.
    of_trajectory: HashMap<String, usize>,
    /// Invocation step → its bracket.
    of_invoke: HashMap<StepKey, usize>,
    /// Step names taken this turn, so two subagents with the same label stay distinct.
    names: HashSet<String>,
    /// Brackets currently open on the wire, in opening order.
    shown: Vec<usize>,
}

#[derive(Debug)]
struct Bracket {
    name: String,
    /// The invocation step's label (its `toolSummary`).
    label: String,
    /// The invocation's tool call and the message holding it, when it is shown as one.
    call: Option<(String, Option<String>)>,
    /// The trajectory whose step invoked the subagents.
    invoker: String,
    /// The invocation step, unless the bracket was made for an unclaimed trajectory.
    invoke: Option<StepKey>,
    invoke_final: bool,
    /// Every trajectory assigned to this bracket.
    members: Vec<String>,
    /// Members not yet idle.
    running: BTreeSet<String>,
    ever_shown: bool,
    /// Merged into an invocation's bracket; no longer used.
    merged: bool,
}

impl Bracket {
    fn closable(&self) -> bool {
        (self.invoke.is_none() || self.invoke_final) && self.running.is_empty()
    }

    /// An invocation in flight that has started no subagent yet.
    fn awaits_first_subagent(&self) -> bool {
        !self.merged && self.invoke.is_some() && !self.invoke_final && self.members.is_empty()
    }
}

impl Subagents {
    /// An invocation step seen for the first time: opens its bracket (`STEP_STARTED`).
    ///
    /// Unclaimed subagent trajectories of the same invoker that produced nothing yet are
    /// adopted, which covers a trajectory whose `RUNNING` arrived before its invocation.
    pub(crate) fn invoke(&mut self, key: &StepKey, label: &str, out: &mut Vec<Event>) {
        if let Some(index) = self.register(key, label) {
            self.show(index, out);
        }
    }

    /// An invocation step seen for the first time, with no bracket on the wire: returns its
    /// index (`None` if it was known already). Adopts unclaimed trajectories as
    /// [`invoke`](Self::invoke) does.
    pub(crate) fn register(&mut self, key: &StepKey, label: &str) -> Option<usize> {
        if self.of_invoke.contains_key(key) {
            return None;
        }
        let name = self.unique_name(label);
        let index = self.brackets.len();
        self.brackets.push(Bracket {
            name,
            label: label.to_owned(),
            call: None,
            invoker: key.trajectory_id.clone(),
            invoke: Some(key.clone()),
            invoke_final: false,
            members: Vec::new(),
            running: BTreeSet::new(),
            ever_shown: false,
            merged: false,
        });
        self.of_invoke.insert(key.clone(), index);
        let orphans: Vec<usize> = (0..index)
            .filter(|&i| {
                let b = &self.brackets[i];
                b.invoke.is_none() && !b.ever_shown && !b.merged && b.invoker == key.trajectory_id
            })
            .collect();
        for orphan in orphans {
            let members = std::mem::take(&mut self.brackets[orphan].members);
            let running = std::mem::take(&mut self.brackets[orphan].running);
            self.brackets[orphan].merged = true;
            for member in &members {
                self.of_trajectory.insert(member.clone(), index);
            }
            self.brackets[index].members.extend(members);
            self.brackets[index].running.extend(running);
        }
        Some(index)
    }

    /// The invocation step reached DONE or ERROR. Returns its bracket if it is complete now
    /// (final, and every subagent it started is idle).
    pub(crate) fn invoke_finished(&mut self, key: &StepKey) -> Option<usize> {
        let index = *self.of_invoke.get(key)?;
        let bracket = &mut self.brackets[index];
        bracket.invoke_final = true;
        bracket.closable().then_some(index)
    }

    /// Whether the bracket is open on the wire.
    pub(crate) fn is_shown(&self, index: usize) -> bool {
        self.shown.contains(&index)
    }

    /// The bracket a subagent trajectory belongs to.
    pub(crate) fn bracket_of(&self, trajectory_id: &str) -> Option<usize> {
        self.of_trajectory.get(trajectory_id).copied()
    }

    /// The trajectory whose step started the bracket's subagents.
    pub(crate) fn invoker(&self, index: usize) -> &str {
        &self.brackets[index].invoker
    }

    /// The invocation step's label.
    pub(crate) fn label(&self, index: usize) -> &str {
        &self.brackets[index].label
    }

    /// The invocation step, unless the bracket was made for an unclaimed trajectory.
    pub(crate) fn invoke_key(&self, index: usize) -> Option<&StepKey> {
        self.brackets[index].invoke.as_ref()
    }

    /// Records the invocation's tool call and the message holding it.
    pub(crate) fn set_call(&mut self, index: usize, call: String, message: Option<String>) {
        self.brackets[index].call = Some((call, message));
    }

    /// The invocation's tool call and the message holding it, when it is shown as one.
    pub(crate) fn call(&self, index: usize) -> Option<(String, Option<String>)> {
        self.brackets[index].call.clone()
    }

    /// Every bracket with an invocation step, in order.
    pub(crate) fn invocations(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.brackets.len())
            .filter(|&i| !self.brackets[i].merged && self.brackets[i].invoke.is_some())
    }

    /// A trajectory with a parent is running (its `RUNNING`, or a first step of it).
    ///
    /// A known subagent is simply marked running again (a re-woken subagent). A new one joins
    /// an invocation of its parent, in this order of preference: the oldest running one that
    /// has no subagent yet (several invocations in flight get one each), the newest running one
    /// (one invocation may start several subagents), the oldest finished one that started none
    /// (its `RUNNING` came late); else it gets a bracket of its own. A parent chain that would
    /// loop is ignored, so brackets always form a tree.
    pub(crate) fn running(&mut self, trajectory_id: &str, parent: &str) {
        if let Some(&index) = self.of_trajectory.get(trajectory_id) {
            self.brackets[index]
                .running
                .insert(trajectory_id.to_owned());
            return;
        }
        if self.would_loop(trajectory_id, parent) {
            return;
        }
        let invocations = || {
            self.brackets
                .iter()
                .enumerate()
                .filter(|(_, b)| !b.merged && b.invoker == parent && b.invoke.is_some())
        };
        let index = invocations()
            .find(|(_, b)| !b.invoke_final && b.members.is_empty())
            .or_else(|| invocations().rev().find(|(_, b)| !b.invoke_final))
            .or_else(|| invocations().find(|(_, b)| b.members.is_empty()))
            .map(|(i, _)| i)
            .unwrap_or_else(|| {
                let name = self.unique_name(trajectory_id);
                self.brackets.push(Bracket {
                    name,
                    label: String::new(),
                    call: None,
                    invoker: parent.to_owned(),
                    invoke: None,
                    invoke_final: false,
                    members: Vec::new(),
                    running: BTreeSet::new(),
                    ever_shown: false,
                    merged: false,
                });
                self.brackets.len() - 1
            });
        let bracket = &mut self.brackets[index];
        bracket.members.push(trajectory_id.to_owned());
        bracket.running.insert(trajectory_id.to_owned());
        self.of_trajectory.insert(trajectory_id.to_owned(), index);
    }

    /// Whether more than one invocation of `parent` could have started the unknown `trajectory_id`:
    /// several in flight, none final and none with a subagent yet. The harness starts the
    /// subagents of parallel invocations in any order.
    pub(crate) fn placement_ambiguous(&self, trajectory_id: &str, parent: &str) -> bool {
        !self.of_trajectory.contains_key(trajectory_id)
            && self
                .brackets
                .iter()
                .filter(|b| b.invoker == parent && b.awaits_first_subagent())
                .count()
                > 1
    }

    /// Places `trajectory_id` in the bracket of the invocation `key`, if that invocation still
    /// awaits its first subagent; false otherwise.
    pub(crate) fn place(&mut self, trajectory_id: &str, key: &StepKey) -> bool {
        let Some(&index) = self.of_invoke.get(key) else {
            return false;
        };
        if self.of_trajectory.contains_key(trajectory_id)
            || !self.brackets[index].awaits_first_subagent()
        {
            return false;
        }
        let bracket = &mut self.brackets[index];
        bracket.members.push(trajectory_id.to_owned());
        bracket.running.insert(trajectory_id.to_owned());
        self.of_trajectory.insert(trajectory_id.to_owned(), index);
        true
    }

    /// Whether the trajectory is a known subagent.
    pub(crate) fn is_subagent(&self, trajectory_id: &str) -> bool {
        self.of_trajectory.contains_key(trajectory_id)
    }

    /// A subagent went idle or was cancelled. Returns its bracket if it is complete now.
    pub(crate) fn ended(&mut self, trajectory_id: &str) -> Option<usize> {
        let index = *self.of_trajectory.get(trajectory_id)?;
        let bracket = &mut self.brackets[index];
        bracket.running.remove(trajectory_id);
        bracket.closable().then_some(index)
    }

    /// The trajectories of a bracket (whose open blocks must close before it does).
    pub(crate) fn members(&self, index: usize) -> &[String] {
        &self.brackets[index].members
    }

    /// Brackets that must be (re-)opened before output of `trajectory_id`, outermost first.
    pub(crate) fn closed_chain(&self, trajectory_id: &str) -> Vec<usize> {
        let mut chain = Vec::new();
        let mut current = self.of_trajectory.get(trajectory_id).copied();
        while let Some(index) = current {
            if self.shown.contains(&index) || chain.contains(&index) {
                break;
            }
            chain.push(index);
            current = self
                .of_trajectory
                .get(&self.brackets[index].invoker)
                .copied();
        }
        chain.reverse();
        chain
    }

    /// `STEP_STARTED` for a bracket not open on the wire.
    pub(crate) fn show(&mut self, index: usize, out: &mut Vec<Event>) {
        if self.shown.contains(&index) {
            return;
        }
        let bracket = &mut self.brackets[index];
        bracket.ever_shown = true;
        out.push(Event::step_started(bracket.name.clone()));
        self.shown.push(index);
    }

    /// `STEP_FINISHED` for a bracket open on the wire.
    pub(crate) fn finish(&mut self, index: usize, out: &mut Vec<Event>) {
        if let Some(position) = self.shown.iter().position(|&i| i == index) {
            self.shown.remove(position);
            out.push(Event::step_finished(self.brackets[index].name.clone()));
        }
    }

    /// Closes every open bracket, innermost (latest opened) first, for the end of a run.
    pub(crate) fn close_all(&mut self, out: &mut Vec<Event>) {
        while let Some(index) = self.shown.pop() {
            out.push(Event::step_finished(self.brackets[index].name.clone()));
        }
    }

    fn would_loop(&self, trajectory_id: &str, parent: &str) -> bool {
        let mut current = parent;
        for _ in 0..=self.brackets.len() {
            if current == trajectory_id {
                return true;
            }
            match self.of_trajectory.get(current) {
                Some(&index) => current = &self.brackets[index].invoker,
                None => return false,
            }
        }
        true
    }

    fn unique_name(&mut self, label: &str) -> String {
        let label = label.trim();
        let label: String = if label.is_empty() {
            "subagent".to_owned()
        } else {
            label.chars().take(MAX_LABEL_CHARS).collect()
        };
        let base = format!("subagent:{label}");
        let mut name = base.clone();
        let mut n = 1;
        while self.names.contains(&name) {
            n += 1;
            name = format!("{base}#{n}");
        }
        self.names.insert(name.clone());
        name
    }
}
