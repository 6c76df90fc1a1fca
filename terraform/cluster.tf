# The cluster: zonal, VPC-native, Dataplane V2 (it enforces the chart's NetworkPolicies),
# Workload Identity, shielded nodes, on the regular release channel. Nodes keep public
# addresses: the core node's is the SIP address (kubeip), and the workers reach the vendors
# and LiveKit without a NAT in the way of their media.
resource "google_container_cluster" "this" {
  # checkov:skip=CKV_GCP_12:Dataplane V2 (datapath_provider ADVANCED_DATAPATH) enforces NetworkPolicies itself; GKE refuses the network_policy block (Calico) beside it.
  # checkov:skip=CKV_GCP_65:Google Groups for RBAC needs a Google Workspace domain; set var.rbac_security_group where the organisation has one.
  project  = var.project_id
  name     = var.name
  location = var.zone

  network         = google_compute_network.this.id
  subnetwork      = google_compute_subnetwork.this.id
  networking_mode = "VPC_NATIVE"
  ip_allocation_policy {
    cluster_secondary_range_name  = "pods"
    services_secondary_range_name = "services"
  }
  datapath_provider = "ADVANCED_DATAPATH"

  # The pools below are the cluster's; the default one goes at once.
  remove_default_node_pool = true
  initial_node_count       = 1
  deletion_protection      = true

  release_channel {
    channel = "REGULAR"
  }

  workload_identity_config {
    workload_pool = "${var.project_id}.svc.id.goog"
  }

  master_authorized_networks_config {
    dynamic "cidr_blocks" {
      for_each = var.master_authorized_cidrs
      content {
        display_name = cidr_blocks.key
        cidr_block   = cidr_blocks.value
      }
    }
  }

  private_cluster_config {
    enable_private_nodes    = false
    enable_private_endpoint = false
  }

  dynamic "authenticator_groups_config" {
    for_each = var.rbac_security_group == null ? [] : [var.rbac_security_group]
    content {
      security_group = authenticator_groups_config.value
    }
  }

  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }

  enable_shielded_nodes       = true
  enable_legacy_abac          = false
  enable_intranode_visibility = true

  binary_authorization {
    evaluation_mode = "PROJECT_SINGLETON_POLICY_ENFORCE"
  }

  logging_config {
    enable_components = ["SYSTEM_COMPONENTS", "WORKLOADS"]
  }

  monitoring_config {
    enable_components = ["SYSTEM_COMPONENTS"]
    managed_prometheus {
      enabled = true
    }
  }

  resource_labels = local.labels

  node_config {
    # Only the default pool's, removed at once; the real pools say their own.
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
  }

  lifecycle {
    ignore_changes = [node_config]
  }
}

locals {
  labels = merge({ "app" = "pinecall" }, var.labels)

  node_shape = {
    image_type = "COS_CONTAINERD"
    scopes     = ["https://www.googleapis.com/auth/cloud-platform"]
  }
}

# The core node: the platform's services, Postgres, LiveKit and SIP, the core workers and the
# overflow (deploy/charts: global.pools.core). Tagged for the SIP firewall; kubeip gives it the
# SIP address, the same one when the pool makes it again.
resource "google_container_node_pool" "core" {
  project    = var.project_id
  name       = "core"
  location   = var.zone
  cluster    = google_container_cluster.this.name
  node_count = var.core_nodes

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.core_machine_type
    image_type      = local.node_shape.image_type
    disk_size_gb    = 100
    disk_type       = "pd-balanced"
    service_account = google_service_account.nodes.email
    oauth_scopes    = local.node_shape.scopes
    tags            = ["${var.name}-sip"]
    labels          = merge(local.labels, { "pinecall.dev/pool" = "core", "kubeip" = "sip" })
    resource_labels = local.labels

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    metadata = {
      "disable-legacy-endpoints" = "true"
    }
  }
}

# The worker pool: scaled workers only (tainted), one of 32 seats a node, made by the cluster
# autoscaler for a pod that has no node and removed once empty; from 0 to workers_max
# (seed 000, "The burst").
resource "google_container_node_pool" "workers" {
  project  = var.project_id
  name     = "workers"
  location = var.zone
  cluster  = google_container_cluster.this.name

  initial_node_count = 0
  autoscaling {
    min_node_count = 0
    max_node_count = var.workers_max
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.workers_machine_type
    image_type      = local.node_shape.image_type
    disk_size_gb    = 50
    disk_type       = "pd-balanced"
    service_account = google_service_account.nodes.email
    oauth_scopes    = local.node_shape.scopes
    labels          = merge(local.labels, { "pinecall.dev/pool" = "workers" })
    resource_labels = local.labels

    taint {
      key    = "pinecall.dev/pool"
      value  = "workers"
      effect = "NO_SCHEDULE"
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    metadata = {
      "disable-legacy-endpoints" = "true"
    }
  }
}
