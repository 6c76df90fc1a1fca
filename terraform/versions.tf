# Pinned: a plan made today is the plan made next year (terraform-google-modules' habit).
terraform {
  required_version = ">= 1.6.0, < 2.0.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "= 6.12.0"
    }
  }
}
