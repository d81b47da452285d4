# A virtual cluster is imported by <namespace>/<name>, or by its name when it lives in the
# default namespace vc-<name>. values_override cannot be recovered from the cluster.
terraform import gpufleet_virtual_cluster.team_a vc-team-a/team-a
