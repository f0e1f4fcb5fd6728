-- Every claim of a job is numbered, and the job id a worker holds names its claim ("<id>.<claim>"):
-- completing, retrying, burying, extending or releasing a job is done only by the claim that holds it.
-- Without it a worker whose lease ran out (and whose job another worker claimed), or whose delivery job
-- an operator reset with a redelivery while it ran, could mark that newer claim's job done.
ALTER TABLE jobs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
