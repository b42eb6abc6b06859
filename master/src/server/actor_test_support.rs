//! Set-up shared by the actor's test modules: an agent joining the actor directly, without
//! a QUIC session.

use super::*;

/// Registers node `n1` with `map_slots` map slots, reporting `live` containers; returns
/// the agent's id and its outbound queue (the `Registered` answer still in it).
pub(super) fn register_node(
    actor: &mut Actor,
    map_slots: u32,
    live: Vec<ContainerReport>,
) -> (AgentId, mpsc::UnboundedReceiver<MasterToAgent>) {
    let (outbound, outbound_rx) = mpsc::unbounded_channel();
    let (assigned, mut assigned_rx) = oneshot::channel();
    let input = Input::AgentRegistered {
        node: "n1".into(),
        map_slots,
        reduce_slots: 0,
        live_containers: live,
        outbound,
        assigned,
        data_mode: DataMode::Shared,
        data_dir_id: String::new(),
    };
    let commands = actor.on_input(input);
    actor.execute_settled(commands).unwrap();
    (assigned_rx.try_recv().unwrap(), outbound_rx)
}

/// `agent`'s report that `launch`'s container reached `state` now (exit code 0 if it
/// completed), as the input its session would hand the actor.
pub(super) fn report_input(actor: &Actor, agent: AgentId, launch: &Launch, state: ContainerState) -> Input {
    let report = ContainerReport {
        container: launch.container,
        task: launch.task,
        attempt: launch.attempt,
        state,
        at: actor.clock.now(),
        exit_code: (state == ContainerState::Completed).then_some(0),
        message: None,
    };
    Input::Agent(Event::ContainerReports { agent, reports: vec![report] })
}
