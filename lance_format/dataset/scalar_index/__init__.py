"""BTREE and BITMAP scalar indices: pylance's file layouts, filter answering, building."""
