//! Ephemeral resources, one file each: values that exist only during one Terraform run and
//! never reach the plan or the state.

pub mod virtual_cluster_connection;
