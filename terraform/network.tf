# The cluster's own network: VPC-native (alias ranges for pods and services), flow logs on.
resource "google_compute_network" "this" {
  project                 = var.project_id
  name                    = var.name
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "this" {
  project                  = var.project_id
  name                     = var.name
  region                   = var.region
  network                  = google_compute_network.this.id
  ip_cidr_range            = "10.10.0.0/20"
  private_ip_google_access = true

  secondary_ip_range {
    range_name    = "pods"
    ip_cidr_range = "10.20.0.0/14"
  }

  secondary_ip_range {
    range_name    = "services"
    ip_cidr_range = "10.30.0.0/20"
  }

  log_config {
    aggregation_interval = "INTERVAL_5_SEC"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# SIP reaches LiveKit SIP on the core node only, from the trunks' addresses only: signalling
# (5060) and media (RTP, 10000-20000, livekit-sip's default range).
resource "google_compute_firewall" "sip" {
  project       = var.project_id
  name          = "${var.name}-sip"
  network       = google_compute_network.this.id
  direction     = "INGRESS"
  source_ranges = var.sip_source_cidrs
  target_tags   = ["${var.name}-sip"]

  allow {
    protocol = "udp"
    ports    = ["5060", "10000-20000"]
  }

  allow {
    protocol = "tcp"
    ports    = ["5060"]
  }

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

# A self-hosted LiveKit on the core node: web visitors' media (WebRTC over UDP 50000-60000, or
# TCP 7881) from anywhere. Off when LiveKit is LiveKit Cloud.
resource "google_compute_firewall" "livekit" {
  count         = var.livekit_on_core ? 1 : 0
  project       = var.project_id
  name          = "${var.name}-livekit-media"
  network       = google_compute_network.this.id
  direction     = "INGRESS"
  source_ranges = ["0.0.0.0/0"]
  target_tags   = ["${var.name}-sip"]

  allow {
    protocol = "udp"
    ports    = ["50000-60000"]
  }

  allow {
    protocol = "tcp"
    ports    = ["7881"]
  }

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}
