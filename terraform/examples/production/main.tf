# An environment: production's cluster. Copy this folder for another (staging), set its
# variables, and keep its state in a bucket of its own.
#   terraform init && terraform apply -var project_id=my-project
terraform {
  required_version = ">= 1.6.0, < 2.0.0"

  # backend "gcs" {
  #   bucket = "my-project-terraform"
  #   prefix = "pinecall/production"
  # }
}

variable "project_id" {
  description = "The Google Cloud project."
  type        = string
}

provider "google" {
  project = var.project_id
  region  = "europe-west1"
}

module "pinecall" {
  source = "../.."

  project_id = var.project_id
  name       = "pinecall"
  region     = "europe-west1"
  zone       = "europe-west1-b"
  # workers.scaled.production.most (35) + workers.scaled.sandbox.most (2).
  workers_max = 37

  master_authorized_cidrs = {
    operators = "203.0.113.0/24"
  }
  # The SIP trunk's addresses (the carrier's).
  sip_source_cidrs = ["198.51.100.0/24"]
}

output "get_credentials" {
  description = "Point kubectl and helm at the cluster."
  value       = module.pinecall.get_credentials
}

output "sip_address" {
  description = "Give this address to the SIP trunk."
  value       = module.pinecall.sip_address
}
