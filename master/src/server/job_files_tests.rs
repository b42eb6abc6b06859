use super::*;

fn dirs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(n, d)| (n.to_string(), d.to_string())).collect()
}

fn connected(pairs: &[(&str, u32)]) -> BTreeMap<String, AgentId> {
    pairs.iter().map(|(n, a)| (n.to_string(), AgentId(*a))).collect()
}

fn holders(nodes: &[&str]) -> BTreeSet<String> {
    nodes.iter().map(|n| n.to_string()).collect()
}

#[test]
fn agents_with_their_own_directories_each_serve_their_outputs() {
    let node_dirs = dirs(&[("n1", "a"), ("n2", "b"), ("n3", "c")]);
    let up = connected(&[("n1", 1), ("n2", 2), ("n3", 3)]);
    let servers = serving_nodes(&holders(&["n3", "n1"]), &up, &node_dirs).unwrap();
    assert_eq!(servers, [("n1".to_string(), AgentId(1)), ("n3".to_string(), AgentId(3))]);
    // A holder away with its own directory: its outputs cannot be read now.
    let up = connected(&[("n1", 1), ("n2", 2)]);
    let err = serving_nodes(&holders(&["n1", "n3"]), &up, &node_dirs).unwrap_err();
    assert!(err.contains("node n3") && err.contains("not connected"), "{err}");
}

#[test]
fn agents_sharing_a_directory_are_asked_once_and_stand_in_for_each_other() {
    let node_dirs = dirs(&[("n1", "nfs"), ("n2", "nfs"), ("n3", "nfs")]);
    let up = connected(&[("n1", 1), ("n2", 2), ("n3", 3)]);
    let servers = serving_nodes(&holders(&["n2", "n3"]), &up, &node_dirs).unwrap();
    assert_eq!(servers, [("n2".to_string(), AgentId(2))]);
    // The only holder is away; another node on the same directory serves.
    let up = connected(&[("n1", 1)]);
    let servers = serving_nodes(&holders(&["n3"]), &up, &node_dirs).unwrap();
    assert_eq!(servers, [("n1".to_string(), AgentId(1))]);
}

#[test]
fn one_node_per_data_directory_removes_the_job_directory() {
    let nodes: Vec<String> = ["n1", "n2", "n3", "n4"].iter().map(|n| n.to_string()).collect();
    let shared = dirs(&[("n1", "nfs"), ("n2", "nfs"), ("n3", "nfs"), ("n4", "own")]);
    assert_eq!(removes_job_dir(&nodes, &shared), [true, false, false, true]);
    let local = dirs(&[("n1", "a"), ("n2", "b"), ("n3", "c"), ("n4", "d")]);
    assert_eq!(removes_job_dir(&nodes, &local), [true, true, true, true]);
}

#[test]
fn the_check_interval_follows_the_retention_within_bounds() {
    assert_eq!(JobFiles::new(Duration::from_secs(3600)).check_every(), Duration::from_secs(60));
    assert_eq!(JobFiles::new(Duration::from_secs(20)).check_every(), Duration::from_secs(5));
    assert_eq!(JobFiles::new(Duration::ZERO).check_every(), Duration::from_secs(1));
}
